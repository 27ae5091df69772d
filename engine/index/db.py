"""The index database: one SQLite file through apsw, with FTS5 and sqlite-vec (``engine:index``).

A thin shell: every method is one short transaction under one lock (the engine is the one
writer; WAL lets readers of other processes, such as a ``doctor``, look in). Searches read on a
connection of their own (:attr:`IndexDB.reader`), so a read never waits for a write's
transaction: what a write changed is handed to the reader's in-memory copies only once it is
committed. What goes into the rows is decided by :mod:`engine.index.docs`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import sqlite_vec

from engine.index import schema
from engine.index.docs import ChunkDoc, FactDoc
from engine.index.reads import IndexReader, blob
from engine.index.schema import CHUNKS, FACTS, ChunkRow, FactRow

log = logging.getLogger("almanac.engine.index")

__all__ = ["ChunkRow", "FactRow", "IndexDB", "IndexReader"]


#: The ``meta`` key a clean stop writes (:meth:`IndexDB.leave_mark`).
CLEAN_MARK = "clean_stop"


class IndexDB:
    """``<workspace>/.index/index.sqlite``: chunks, facts, links, groups and their FTS/vector tables.

    This is the writer; :attr:`reader` (an :class:`~engine.index.reads.IndexReader` over a
    connection and lock of its own, in WAL mode) does the searching and keeps the in-memory copies
    the writer tells it about after each commit."""

    def __init__(self, path: Path, model_id: str, dim: int) -> None:
        self.path = path
        self.model_id = model_id
        self.dim = dim
        self.lock = threading.RLock()
        self.rebuilt = False  # true when this open found nothing usable and started empty
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = self._connect()
            self._check()
        except (apsw.Error, _Stale) as exc:
            log.warning("index %s is unusable (%s); rebuilding it from the store", path, exc)
            with contextlib.suppress(Exception):
                self.db.close()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self.db = self._connect()
            self._create()
        #: What the transaction under way changed, handed to the reader once it commits.
        self._touched: dict[str, set[int]] = {"chunks": set(), "facts": set()}
        self._groups: set[str] = set()
        self._depth = 0
        self.reader = IndexReader(self._connect(), threading.RLock(), dim)
        self._ensure_vectors()

    @property
    def vectors(self) -> bool:
        return self.dim > 0

    # -- opening -------------------------------------------------------------------------------

    def _connect(self) -> Any:
        db = apsw.Connection(str(self.path))
        db.enable_load_extension(True)
        db.load_extension(sqlite_vec.loadable_path())
        db.enable_load_extension(False)
        db.set_busy_timeout(5000)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # the index is derived: a lost tail is rebuilt
        db.execute("PRAGMA secure_delete=ON")  # a deleted row's bytes are overwritten (life:delete)
        return db

    def _check(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchall()[0][0]
        if version == 0 and not self.db.execute("SELECT 1 FROM sqlite_master").fetchall():
            self._create()
            return
        if version != schema.SCHEMA_VERSION:
            raise _Stale(f"schema version {version}, this engine writes {schema.SCHEMA_VERSION}")
        if self._meta(CLEAN_MARK) is not None:
            return  # left by a clean stop (see take_mark): the full page check is for the others
        result = self.db.execute("PRAGMA quick_check").fetchall()[0][0]
        if result != "ok":
            raise _Stale(f"quick_check: {result}")

    def _create(self) -> None:
        with self.db:
            self.db.execute(schema.TABLES)
            self.db.execute(f"PRAGMA user_version={schema.SCHEMA_VERSION}")
        self.rebuilt = True

    def _meta(self, key: str) -> str | None:
        rows = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchall()
        return None if not rows else str(rows[0][0])

    def _ensure_vectors(self) -> None:
        """Vector tables for this model; other models' vectors are dropped and redone (embed:model-id)."""
        if self._meta("model_id") == self.model_id and self._meta("dim") == str(self.dim):
            return
        with self.transaction():
            self.db.execute("DROP TABLE IF EXISTS vec_chunks; DROP TABLE IF EXISTS vec_facts")
            if self.dim > 0:
                self.db.execute(schema.vec_tables(self.dim))
            pending = 1 if self.dim > 0 else 0
            self.db.execute("UPDATE chunks SET pending = ?", (pending,))
            self.db.execute("UPDATE facts SET pending = ?", (pending,))
            self.db.execute("UPDATE groups SET vector = NULL, dirty = 1")
            for key, value in (("model_id", self.model_id), ("dim", str(self.dim))):
                self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
        self.reader.forget_vectors()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction under the lock; what it changed is handed to the reader after the
        commit, never before: a reader that looked in meanwhile read the rows as they were and
        keeps nothing it must forget. (After a rollback, with the next commit: a harmless reload.)"""
        with self.lock:
            self._depth += 1
            try:
                with self.db:
                    yield
            finally:
                self._depth -= 1
            if self._depth:
                return  # inside another transaction: handed over when that one ends
            touched, self._touched = self._touched, {"chunks": set(), "facts": set()}
            groups, self._groups = self._groups, set()
            self.reader.committed(touched, groups)

    def touch(self, table: str, rowid: int) -> None:
        self._touched[table].add(rowid)

    def take_mark(self) -> str | None:
        """The mark a clean stop left (:mod:`engine.index.signature`), removed: until the next
        clean stop leaves another, a start reconciles the whole store."""
        with self.lock:
            found = self._meta(CLEAN_MARK)
            if found is not None:
                with self.db:
                    self.db.execute("DELETE FROM meta WHERE key = ?", (CLEAN_MARK,))
            return found

    def leave_mark(self, mark: str | None) -> None:
        """Record, at a clean stop, that the rows match the store whose mark is ``mark``."""
        if mark is None:
            return
        with self.transaction():
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (CLEAN_MARK, mark))

    def close(self) -> None:
        with self.lock:
            self.db.close()
        self.reader.close()

    # -- writing -------------------------------------------------------------------------------

    def chunk_hashes(self) -> dict[str, dict[int, str]]:
        out: dict[str, dict[int, str]] = {}
        with self.lock:
            for memory, chunk, digest in self.db.execute("SELECT memory, chunk, hash FROM chunks"):
                out.setdefault(memory, {})[chunk] = digest
        return out

    def fact_hashes(self) -> dict[str, str]:
        with self.lock:
            return dict(self.db.execute("SELECT memory, hash FROM facts").fetchall())

    def put_memory(self, memory: str, docs: Sequence[ChunkDoc], links: Iterable[str]) -> bool:
        """Make ``memory``'s rows exactly ``docs`` (and its links ``links``); True if anything changed."""
        with self.transaction():
            old = {
                chunk: (rowid, digest, embed, grp)
                for rowid, chunk, digest, embed, grp in self.db.execute(
                    "SELECT id, chunk, hash, embed_text, grp FROM chunks WHERE memory = ?", (memory,)
                )
            }
            changed = False
            groups: set[str] = set()
            for doc in docs:
                digest = doc.hash
                before = old.pop(doc.chunk, None)
                if before is not None and before[1] == digest:
                    continue
                changed = True
                groups.add(doc.grp)
                values = (*row_values(doc), digest)
                if before is None:
                    self.db.execute(CHUNKS.insert(), (*values, int(self.vectors)))
                    continue
                rowid, _, embed, grp = before
                groups.add(grp)
                pending = int(self.vectors and embed != doc.embed_text)
                sets = ", ".join(f"{c} = ?" for c in CHUNKS.names if c != "pending")
                self.db.execute(
                    f"UPDATE chunks SET {sets}, pending = max(pending, ?) WHERE id = ?",
                    (*values, pending, rowid),
                )
                if pending and self.vectors:
                    self.db.execute("DELETE FROM vec_chunks WHERE rowid = ?", (rowid,))
                    self.touch("chunks", rowid)
            for rowid, _, _, grp in old.values():
                changed = True
                groups.add(grp)
                self._delete_chunk(rowid)
            if not docs:
                self.db.execute("DELETE FROM voices WHERE memory = ?", (memory,))
            self.db.execute("DELETE FROM links WHERE src = ?", (memory,))
            self.db.executemany(
                "INSERT OR IGNORE INTO links VALUES (?, ?)", [(memory, target) for target in links]
            )
            self._dirty(groups)
            return changed

    def _delete_chunk(self, rowid: int) -> None:
        self.db.execute("DELETE FROM chunks WHERE id = ?", (rowid,))
        if self.vectors:
            self.db.execute("DELETE FROM vec_chunks WHERE rowid = ?", (rowid,))
            self.touch("chunks", rowid)

    def put_voices(self, rows: Sequence[tuple[str, str]]) -> None:
        """Store who wrote each memory (``(memory, encoded)``; "" removes it)."""
        with self.transaction():
            for memory, encoded in rows:
                if encoded:
                    self.db.execute(
                        "INSERT INTO voices VALUES (?, ?) ON CONFLICT (memory) DO UPDATE SET "
                        "voices = excluded.voices WHERE voices != excluded.voices",
                        (memory, encoded),
                    )
                else:
                    self.db.execute("DELETE FROM voices WHERE memory = ?", (memory,))

    def purge(self) -> None:
        """After a permanent deletion: merge the full-text indexes (dropping the deleted terms) and
        checkpoint the write-ahead log, so no copy of the deleted words stays in the index files."""
        with self.lock:
            with self.db:
                for table in ("chunks", "facts"):
                    self.db.execute(f"INSERT INTO {table}_fts ({table}_fts) VALUES ('optimize')")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def delete_memory(self, memory: str) -> bool:
        return self.put_memory(memory, [], [])

    def _dirty(self, groups: Iterable[str]) -> None:
        for key in groups:
            if key:
                self._groups.add(key)
                self.db.execute(
                    "INSERT INTO groups (key, text, dirty) VALUES (?, '', 1) "
                    "ON CONFLICT (key) DO UPDATE SET dirty = 1",
                    (key,),
                )

    def put_fact(self, doc: FactDoc) -> bool:
        with self.transaction():
            rows = self.db.execute("SELECT id, hash FROM facts WHERE memory = ?", (doc.memory,)).fetchall()
            if rows and rows[0][1] == doc.hash:
                return False
            values = (*row_values(doc), doc.hash, int(self.vectors))
            if rows:
                self._delete_fact(rows[0][0])
            self.db.execute(FACTS.insert(), values)
            return True

    def _delete_fact(self, rowid: int) -> None:
        self.db.execute("DELETE FROM facts WHERE id = ?", (rowid,))
        if self.vectors:
            self.db.execute("DELETE FROM vec_facts WHERE rowid = ?", (rowid,))
            self.touch("facts", rowid)

    def delete_fact(self, memory: str) -> bool:
        with self.transaction():
            rows = self.db.execute("SELECT id FROM facts WHERE memory = ?", (memory,)).fetchall()
            for (rowid,) in rows:
                self._delete_fact(rowid)
            return bool(rows)

    # -- background work -------------------------------------------------------------------------

    def texts(self) -> set[str]:
        """Every text the index embeds (or will), chunks and facts alike: read with their context
        and alone."""
        with self.lock:
            return {
                str(t)
                for table in ("chunks", "facts")
                for row in self.db.execute(f"SELECT {_EMBED_TEXT[table]}, {_OWN_TEXT[table]} FROM {table}")
                for t in row
            }

    def pending(self, table: str, limit: int) -> list[tuple[int, str, str]]:
        """Rows of ``chunks`` or ``facts`` still waiting for a vector: ``(rowid, text read with its
        context, own text)`` — the two texts whose vectors make the row's
        (:func:`~engine.index.vectors.contextual_vector`); a fact's are the same."""
        text, own = _EMBED_TEXT[table], _OWN_TEXT[table]
        with self.lock:
            sql = f"SELECT id, {text}, {own} FROM {table} WHERE pending = 1 ORDER BY id LIMIT ?"
            return [(int(r), str(t), str(o)) for r, t, o in self.db.execute(sql, (limit,))]

    def put_vectors(self, table: str, rows: Sequence[tuple[int, str, np.ndarray[Any, Any]]]) -> int:
        """Store vectors for rows still holding the text they were computed from; returns how many."""
        done = 0
        text = (
            "embed_text"
            if table == "chunks"
            else "subject || ' ' || predicate || ': ' || object || '. ' || statement"
        )
        with self.transaction():
            for rowid, embedded, vector in rows:
                now = self.db.execute(
                    f"SELECT {text}, {'grp' if table == 'chunks' else 'NULL'} FROM {table} "
                    "WHERE id = ? AND pending = 1",
                    (rowid,),
                ).fetchall()
                if not now or now[0][0] != embedded:
                    continue  # changed (or gone) while it was being embedded: it is pending again
                self.db.execute(f"DELETE FROM vec_{table} WHERE rowid = ?", (rowid,))
                self.db.execute(
                    f"INSERT INTO vec_{table} (rowid, embedding) VALUES (?, ?)", (rowid, blob(vector))
                )
                self.db.execute(f"UPDATE {table} SET pending = 0 WHERE id = ?", (rowid,))
                self.touch(table, rowid)
                if now[0][1]:
                    self._dirty([now[0][1]])
                done += 1
        return done

    def dirty_groups(self, limit: int) -> list[str]:
        with self.lock:
            sql = "SELECT key FROM groups WHERE dirty = 1 ORDER BY key LIMIT ?"
            return [str(k) for (k,) in self.db.execute(sql, (limit,))]

    def refresh_group(self, key: str) -> None:
        """Recompute a session's text (its members' words, in order) and mean vector."""
        with self.transaction():
            self._groups.add(key)
            members = self.db.execute(
                "SELECT id, text FROM chunks WHERE grp = ? ORDER BY created, memory, chunk", (key,)
            ).fetchall()
            if not members:
                self.db.execute("DELETE FROM groups WHERE key = ?", (key,))
                return
            text = "\n".join(t for _, t in members)
            vectors = self.reader.chunk_vectors([r for r, _ in members])
            packed = None
            if vectors:
                mean = np.mean(np.stack(list(vectors.values())), axis=0)
                norm = float(np.linalg.norm(mean))
                packed = blob(mean / norm) if norm > 0 else None
            self.db.execute(
                "UPDATE groups SET text = ?, vector = ?, dirty = 0 WHERE key = ?", (text, packed, key)
            )


_EMBED_TEXT = {
    "chunks": "embed_text",
    "facts": "subject || ' ' || predicate || ': ' || object || '. ' || statement",
}
_OWN_TEXT = {"chunks": "text", "facts": _EMBED_TEXT["facts"]}


def row_values(doc: ChunkDoc | FactDoc) -> tuple[Any, ...]:
    """A document's column values, in its table's column order (its fields)."""
    return tuple(getattr(doc, f.name) for f in fields(doc))


class _Stale(Exception):
    """The index file is from another schema version or fails its check."""
