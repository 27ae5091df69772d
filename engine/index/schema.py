"""The index's tables, each declared once (``engine:index``).

The stored columns of ``chunks`` and ``facts`` are the fields of the row documents
(:class:`~engine.index.docs.ChunkDoc`, :class:`~engine.index.docs.FactDoc`) plus ``hash`` and
``pending``; their SQL types come from the fields' types. Each :class:`Table` derives its
``CREATE`` statement, its FTS5 external-content table and triggers, and the column lists of
inserts, updates and selects. The row types recall reads back (:class:`ChunkRow`,
:class:`FactRow`) are checked against the table when this module is imported.

``SCHEMA_VERSION`` goes into ``PRAGMA user_version``. An index with any other version, or one
SQLite calls corrupt, is deleted and rebuilt from the store — never migrated.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, fields
from typing import Any, Final

from engine.index.docs import ChunkDoc, FactDoc

SCHEMA_VERSION: Final = 10  # 7: an undated memory carries the day of a dated entry before it;
# 8: but not a date after the entry was written (a deadline); 9: a chunk's vector blends its own
# words' with its words read among its neighbours' (engine.index.vectors.contextual_vector);
# 10: who wrote each memory of a two-person exchange, where worked out (``voices``)
TOKENIZE: Final = "porter unicode61 remove_diacritics 2"


@dataclass(frozen=True)
class Column:
    name: str
    sql: str  # type and constraint, e.g. "TEXT NOT NULL"


@dataclass(frozen=True)
class Table:
    """A table: its columns (after ``id INTEGER PRIMARY KEY``), FTS5 columns with bm25 weights."""

    name: str
    columns: tuple[Column, ...]
    fts: tuple[tuple[str, float], ...] = ()
    after: str = ""  # constraints and indexes

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def weights(self) -> tuple[float, ...]:
        """bm25 weights of the FTS5 columns, in their order."""
        return tuple(w for _, w in self.fts)

    @property
    def column_list(self) -> str:
        return ", ".join(self.names)

    def insert(self) -> str:
        return f"INSERT INTO {self.name} ({self.column_list}) VALUES ({marks(len(self.columns))})"

    def select(self, row_type: type[Any]) -> str:
        """``SELECT <row_type's fields> FROM <table>`` (every field must be ``id`` or a column)."""
        wanted = [f.name for f in fields(row_type)]
        unknown = [n for n in wanted if n != "id" and n not in self.names]
        if unknown:
            raise TypeError(f"{row_type.__name__} reads columns {self.name} does not have: {unknown}")
        return f"SELECT {', '.join(wanted)} FROM {self.name}"

    def ddl(self) -> str:
        cols = ",\n    ".join(["id INTEGER PRIMARY KEY", *(f"{c.name} {c.sql}" for c in self.columns)])
        out = f"CREATE TABLE {self.name} (\n    {cols}{self.after}\n);\n"
        if not self.fts:
            return out
        t, names = self.name, [n for n, _ in self.fts]
        listed = ", ".join(names)
        new = ", ".join(f"new.{n}" for n in names)
        old = ", ".join(f"old.{n}" for n in names)
        add = f"INSERT INTO {t}_fts (rowid, {listed}) VALUES (new.id, {new});"
        remove = f"INSERT INTO {t}_fts ({t}_fts, rowid, {listed}) VALUES ('delete', old.id, {old});"
        return out + (
            f"CREATE VIRTUAL TABLE {t}_fts USING fts5(\n    {listed},\n"
            f"    content='{t}', content_rowid='id', tokenize='{TOKENIZE}'\n);\n"
            f"CREATE TRIGGER {t}_ai AFTER INSERT ON {t} BEGIN {add} END;\n"
            f"CREATE TRIGGER {t}_ad AFTER DELETE ON {t} BEGIN {remove} END;\n"
            f"CREATE TRIGGER {t}_au AFTER UPDATE OF {listed} ON {t} BEGIN {remove} {add} END;\n"
        )


def marks(n: int) -> str:
    return ",".join("?" * n)


_SQL_TYPES: Final = {str: "TEXT", int: "INTEGER", float: "REAL"}


def doc_columns(doc_type: type[Any]) -> tuple[Column, ...]:
    """The columns of a row document: one per field, typed from its annotation (``X | None``: nullable)."""
    hints = typing.get_type_hints(doc_type)
    out: list[Column] = []
    for f in fields(doc_type):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        base = [a for a in args if a is not type(None)]
        if len(base) != 1 or base[0] not in _SQL_TYPES:
            raise TypeError(f"{doc_type.__name__}.{f.name}: no SQL type for {hint}")
        out.append(Column(f.name, _SQL_TYPES[base[0]] + ("" if len(args) > 1 else " NOT NULL")))
    return tuple(out)


_TAIL: Final = (Column("hash", "TEXT NOT NULL"), Column("pending", "INTEGER NOT NULL"))

#: Notes and log entries, cut into chunks; FTS over the words and their context (docs/recall.md).
CHUNKS: Final = Table(
    "chunks",
    doc_columns(ChunkDoc) + _TAIL,
    fts=(("text", 1.0), ("context", 0.75), ("dates", 2.0), ("speaker", 0.5), ("tags", 3.0)),
    after=",\n    UNIQUE (memory, chunk)",
)
#: The current value of every live fact.
FACTS: Final = Table(
    "facts",
    doc_columns(FactDoc) + _TAIL,
    fts=(("subject", 2.0), ("predicate", 1.5), ("object", 2.0), ("statement", 1.0)),
    after=",\n    UNIQUE (memory)",
)
#: Sessions: one row per (stream, day) with its members' text and mean vector (L2-normalised).
GROUPS: Final = Table(
    "groups",
    (
        Column("key", "TEXT NOT NULL UNIQUE"),
        Column("text", "TEXT NOT NULL"),
        Column("vector", "BLOB"),
        Column("dirty", "INTEGER NOT NULL"),
    ),
    fts=(("text", 1.0),),
)

CHUNK_WEIGHTS: Final = CHUNKS.weights
FACT_WEIGHTS: Final = FACTS.weights


@dataclass(frozen=True)
class ChunkRow:
    """A chunk as recall reads it back (a subset of :data:`CHUNKS`' columns)."""

    id: int
    memory: str
    chunk: int
    kind: str
    state: str
    scope: str | None
    source: str | None
    speaker: str
    created: str | None
    grp: str
    importance: float | None
    text: str
    context: str
    tags: str
    parts: int
    names: str
    dates: str  # the days it was written and names, as words (engine.index.mentions)


@dataclass(frozen=True)
class FactRow:
    """A fact's current value as recall reads it back."""

    id: int
    memory: str
    subject: str
    predicate: str
    object: str
    statement: str
    subject_key: str
    predicate_key: str
    scope: str | None
    source: str | None
    created: str


CHUNK_SELECT: Final = CHUNKS.select(ChunkRow)
FACT_SELECT: Final = FACTS.select(FactRow)

TABLES: Final = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;\n"
    + CHUNKS.ddl()
    + "CREATE INDEX chunks_grp ON chunks (grp);\n"
    "CREATE INDEX chunks_name ON chunks (name);\n"
    "CREATE INDEX chunks_pending ON chunks (pending) WHERE pending = 1;\n"
    + FACTS.ddl()
    + "CREATE INDEX facts_pending ON facts (pending) WHERE pending = 1;\n"
    "CREATE TABLE links (src TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY (src, target)) WITHOUT ROWID;\n"
    + GROUPS.ddl()
    + "CREATE INDEX groups_dirty ON groups (dirty) WHERE dirty = 1;\n"
    # who wrote each memory of a two-person exchange (engine.index.voices), where worked out
    "CREATE TABLE voices (memory TEXT PRIMARY KEY, voices TEXT NOT NULL) WITHOUT ROWID;\n"
)


def vec_tables(dim: int) -> str:
    """The vector tables for one model's dimension (cosine distance)."""
    return f"""
CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[{dim}] distance_metric=cosine);
CREATE VIRTUAL TABLE vec_facts USING vec0(embedding float[{dim}] distance_metric=cosine);
"""
