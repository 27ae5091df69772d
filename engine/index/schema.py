"""The index's SQL: tables, FTS5 external-content tables and their triggers (``engine:index``).

``SCHEMA_VERSION`` goes into ``PRAGMA user_version``. An index with any other version, or one
SQLite calls corrupt, is deleted and rebuilt from the store — never migrated.
"""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 4
TOKENIZE: Final = "porter unicode61 remove_diacritics 2"

#: bm25 column weights of ``chunks_fts``: text, context (neighbours), dates, speaker, tags.
CHUNK_WEIGHTS: Final = (1.0, 0.75, 2.0, 0.5, 3.0)
#: bm25 column weights of ``facts_fts``: subject, predicate, object, statement.
FACT_WEIGHTS: Final = (2.0, 1.5, 2.0, 1.0)

CHUNK_FTS_COLUMNS: Final = ("text", "context", "dates", "speaker", "tags")

TABLES: Final = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE chunks (
    id          INTEGER PRIMARY KEY,
    memory      TEXT    NOT NULL,   -- nte_… / log_…
    chunk       INTEGER NOT NULL,   -- 0, 1, … within the memory
    kind        TEXT    NOT NULL,   -- note | log
    state       TEXT    NOT NULL,   -- live | archived (retired memories are not indexed)
    scope       TEXT,
    source      TEXT,
    speaker     TEXT    NOT NULL,
    created     TEXT,
    grp         TEXT    NOT NULL,   -- the session (stream + day) it belongs to; '' for none
    importance  REAL,
    name        TEXT    NOT NULL,   -- what a [[wikilink]] calls it (case-folded file stem)
    text        TEXT    NOT NULL,
    context     TEXT    NOT NULL,   -- neighbours' text
    dates       TEXT    NOT NULL,   -- the time as words
    tags        TEXT    NOT NULL,
    parts       INTEGER NOT NULL,   -- how many chunks the memory has
    embed_text  TEXT    NOT NULL,   -- what is embedded: previous / text / next
    hash        TEXT    NOT NULL,
    pending     INTEGER NOT NULL,   -- 1 while its vector is missing
    UNIQUE (memory, chunk)
);
CREATE INDEX chunks_grp ON chunks (grp);
CREATE INDEX chunks_name ON chunks (name);
CREATE INDEX chunks_pending ON chunks (pending) WHERE pending = 1;

CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, context, dates, speaker, tags,
    content='chunks', content_rowid='id', tokenize='{TOKENIZE}'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, text, context, dates, speaker, tags)
    VALUES (new.id, new.text, new.context, new.dates, new.speaker, new.tags);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text, context, dates, speaker, tags)
    VALUES ('delete', old.id, old.text, old.context, old.dates, old.speaker, old.tags);
END;
CREATE TRIGGER chunks_au AFTER UPDATE OF text, context, dates, speaker, tags ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text, context, dates, speaker, tags)
    VALUES ('delete', old.id, old.text, old.context, old.dates, old.speaker, old.tags);
    INSERT INTO chunks_fts (rowid, text, context, dates, speaker, tags)
    VALUES (new.id, new.text, new.context, new.dates, new.speaker, new.tags);
END;

CREATE TABLE facts (
    id            INTEGER PRIMARY KEY,
    memory        TEXT NOT NULL UNIQUE,   -- fct_…
    subject       TEXT NOT NULL,
    predicate     TEXT NOT NULL,
    object        TEXT NOT NULL,
    statement     TEXT NOT NULL,
    subject_key   TEXT NOT NULL,
    predicate_key TEXT NOT NULL,
    scope         TEXT,
    source        TEXT,
    created       TEXT NOT NULL,
    hash          TEXT NOT NULL,
    pending       INTEGER NOT NULL
);
CREATE INDEX facts_pending ON facts (pending) WHERE pending = 1;
CREATE VIRTUAL TABLE facts_fts USING fts5(
    subject, predicate, object, statement,
    content='facts', content_rowid='id', tokenize='{TOKENIZE}'
);
CREATE TRIGGER facts_ai AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts (rowid, subject, predicate, object, statement)
    VALUES (new.id, new.subject, new.predicate, new.object, new.statement);
END;
CREATE TRIGGER facts_ad AFTER DELETE ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, subject, predicate, object, statement)
    VALUES ('delete', old.id, old.subject, old.predicate, old.object, old.statement);
END;
CREATE TRIGGER facts_au AFTER UPDATE OF subject, predicate, object, statement ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, subject, predicate, object, statement)
    VALUES ('delete', old.id, old.subject, old.predicate, old.object, old.statement);
    INSERT INTO facts_fts (rowid, subject, predicate, object, statement)
    VALUES (new.id, new.subject, new.predicate, new.object, new.statement);
END;

CREATE TABLE links (src TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY (src, target)) WITHOUT ROWID;

CREATE TABLE groups (
    id      INTEGER PRIMARY KEY,
    key     TEXT NOT NULL UNIQUE,
    text    TEXT NOT NULL,
    vector  BLOB,                 -- mean of its members' vectors, L2-normalised
    dirty   INTEGER NOT NULL
);
CREATE INDEX groups_dirty ON groups (dirty) WHERE dirty = 1;
CREATE VIRTUAL TABLE groups_fts USING fts5(
    text, content='groups', content_rowid='id', tokenize='{TOKENIZE}'
);
CREATE TRIGGER groups_ai AFTER INSERT ON groups BEGIN
    INSERT INTO groups_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER groups_ad AFTER DELETE ON groups BEGIN
    INSERT INTO groups_fts (groups_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER groups_au AFTER UPDATE OF text ON groups BEGIN
    INSERT INTO groups_fts (groups_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO groups_fts (rowid, text) VALUES (new.id, new.text);
END;
"""


def vec_tables(dim: int) -> str:
    """The vector tables for one model's dimension (cosine distance)."""
    return f"""
CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[{dim}] distance_metric=cosine);
CREATE VIRTUAL TABLE vec_facts USING vec0(embedding float[{dim}] distance_metric=cosine);
"""
