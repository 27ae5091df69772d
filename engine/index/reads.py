"""Reading the index: keyword and vector search, rows, groups, links, counts and the dump."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Vectors = dict[int, np.ndarray[Any, np.dtype[np.float32]]]

CHUNK_COLS = (
    "memory, chunk, kind, state, scope, source, speaker, created, grp, importance, name, "
    "text, context, dates, tags, parts, embed_text, hash, pending"
)
FACT_COLS = (
    "memory, subject, predicate, object, statement, subject_key, predicate_key, scope, source, "
    "created, hash, pending"
)
_FACT_FIELDS = (
    "id, memory, subject, predicate, object, statement, subject_key, predicate_key, scope, source, created"
)


@dataclass(frozen=True)
class ChunkRow:
    """A chunk as recall reads it back."""

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


@dataclass(frozen=True)
class FactRow:
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


def marks(n: int) -> str:
    return ",".join("?" * n)


def blob(vector: np.ndarray[Any, Any]) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


class IndexReads:
    """The read side of :class:`~engine.index.db.IndexDB` (same connection, same lock)."""

    db: Any
    lock: threading.RLock
    dim: int

    @property
    def vectors(self) -> bool:
        return self.dim > 0

    # -- reading ---------------------------------------------------------------------------------

    def fts(
        self, table: str, expression: str, weights: Sequence[float], limit: int
    ) -> list[tuple[int, float]]:
        """``(rowid, bm25)`` of the best ``limit`` matches (bm25 negated: higher is better)."""
        if not expression:
            return []
        w = ", ".join(f"{x:g}" for x in weights)
        sql = (
            f"SELECT rowid, bm25({table}_fts, {w}) AS s FROM {table}_fts "
            f"WHERE {table}_fts MATCH ? ORDER BY s LIMIT ?"
        )
        with self.lock:
            return [(int(r), -float(s)) for r, s in self.db.execute(sql, (expression, limit))]

    def knn(self, table: str, query: np.ndarray[Any, Any], k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine similarity)`` of the ``k`` nearest vectors."""
        if not self.vectors:
            return []
        sql = f"SELECT rowid, distance FROM vec_{table} WHERE embedding MATCH ? AND k = ?"
        with self.lock:
            return [(int(r), 1.0 - float(d)) for r, d in self.db.execute(sql, (blob(query), k))]

    def _vectors(self, table: str, ids: Sequence[int]) -> Vectors:
        out: Vectors = {}
        if not self.vectors or not ids:
            return out
        with self.lock:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                sql = f"SELECT rowid, embedding FROM vec_{table} WHERE rowid IN ({marks(len(part))})"
                for rowid, blob in self.db.execute(sql, tuple(part)):
                    out[int(rowid)] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

    def chunk_vectors(self, ids: Sequence[int]) -> Vectors:
        return self._vectors("chunks", ids)

    def fact_vectors(self, ids: Sequence[int]) -> Vectors:
        return self._vectors("facts", ids)

    def chunk_rows(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        out: dict[int, ChunkRow] = {}
        with self.lock:
            for start in range(0, len(ids), 500):
                part = tuple(ids[start : start + 500])
                sql = (
                    "SELECT id, memory, chunk, kind, state, scope, source, speaker, created, grp, "
                    f"importance, text, context, tags, parts FROM chunks WHERE id IN ({marks(len(part))})"
                )
                for row in self.db.execute(sql, part):
                    out[int(row[0])] = ChunkRow(*row)
        return out

    def memory_chunks(self, memories: Sequence[str]) -> list[ChunkRow]:
        """The first chunk of each of ``memories`` (for graph expansion)."""
        with self.lock:
            rows = self.db.execute(
                f"SELECT id FROM chunks WHERE chunk = 0 AND memory IN ({marks(len(memories))})",
                tuple(memories),
            ).fetchall()
        return list(self.chunk_rows([r for (r,) in rows]).values())

    def fact_rows(self, ids: Sequence[int] | None = None) -> dict[int, FactRow]:
        cols = _FACT_FIELDS
        with self.lock:
            if ids is None:
                rows = self.db.execute(f"SELECT {cols} FROM facts").fetchall()
            else:
                rows = self.db.execute(
                    f"SELECT {cols} FROM facts WHERE id IN ({marks(len(ids))})", tuple(ids)
                ).fetchall()
        return {int(r[0]): FactRow(*r) for r in rows}

    def facts_by_memory(self, memories: Sequence[str]) -> dict[str, FactRow]:
        if not memories:
            return {}
        with self.lock:
            sql = f"SELECT {_FACT_FIELDS} FROM facts WHERE memory IN ({marks(len(memories))})"
            rows = self.db.execute(sql, tuple(memories)).fetchall()
        return {str(r[1]): FactRow(*r) for r in rows}

    def groups(self, keys: Sequence[str]) -> dict[str, tuple[int, np.ndarray[Any, Any] | None]]:
        """``key → (rowid, mean vector or None)`` for the groups ``keys``."""
        out: dict[str, tuple[int, np.ndarray[Any, Any] | None]] = {}
        with self.lock:
            sql = f"SELECT key, id, vector FROM groups WHERE key IN ({marks(len(keys))})"
            for key, rowid, blob in self.db.execute(sql, tuple(keys)):
                vec = None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32)
                out[str(key)] = (int(rowid), vec)
        return out

    def links_from(self, memories: Sequence[str]) -> list[tuple[str, str]]:
        """``(source memory, target memory)`` for the wikilinks of ``memories`` that resolve."""
        with self.lock:
            sql = (
                "SELECT DISTINCT l.src, c.memory FROM links l JOIN chunks c "
                "ON c.chunk = 0 AND (c.name = l.target OR lower(c.memory) = l.target) "
                f"WHERE l.src IN ({marks(len(memories))}) AND c.memory != l.src ORDER BY l.src, c.memory"
            )
            return [(str(a), str(b)) for a, b in self.db.execute(sql, tuple(memories))]

    def speakers(self) -> set[str]:
        with self.lock:
            rows = self.db.execute(
                "SELECT DISTINCT speaker FROM chunks UNION SELECT DISTINCT subject FROM facts"
            ).fetchall()
        return {str(s) for (s,) in rows if s}

    def any_embedded(self) -> bool:
        with self.lock:
            sql = (
                "SELECT EXISTS (SELECT 1 FROM chunks WHERE pending = 0) "
                "OR EXISTS (SELECT 1 FROM facts WHERE pending = 0)"
            )
            return bool(self.db.execute(sql).fetchall()[0][0])

    def counts(self) -> dict[str, int]:
        with self.lock:
            one = self.db.execute
            return {
                "chunks": int(one("SELECT count(*) FROM chunks").fetchall()[0][0]),
                "facts": int(one("SELECT count(*) FROM facts").fetchall()[0][0]),
                "chunks_pending": int(one("SELECT count(*) FROM chunks WHERE pending = 1").fetchall()[0][0]),
                "facts_pending": int(one("SELECT count(*) FROM facts WHERE pending = 1").fetchall()[0][0]),
                "groups_dirty": int(one("SELECT count(*) FROM groups WHERE dirty = 1").fetchall()[0][0]),
                "links": int(one("SELECT count(*) FROM links").fetchall()[0][0]),
            }

    def dump(self) -> Iterator[tuple[Any, ...]]:
        """Every row in a stable order, rowids left out (for the rebuild test, ``engine:rebuild``)."""
        with self.lock:
            for row in self.db.execute(f"SELECT 'chunk', {CHUNK_COLS} FROM chunks ORDER BY memory, chunk"):
                yield row
            for row in self.db.execute(f"SELECT 'fact', {FACT_COLS} FROM facts ORDER BY memory"):
                yield row
            yield from self.db.execute("SELECT 'link', src, target FROM links ORDER BY src, target")
            for key, text, blob, dirty in self.db.execute(
                "SELECT key, text, vector, dirty FROM groups ORDER BY key"
            ):
                yield ("group", key, text, _rounded(blob), dirty)
            yield from self.db.execute("SELECT 'meta', key, value FROM meta ORDER BY key")
            if self.vectors:
                for table, key in (("chunks", "memory, chunk"), ("facts", "memory")):
                    sql = (
                        f"SELECT {key}, v.embedding FROM {table} t "
                        f"JOIN vec_{table} v ON v.rowid = t.id ORDER BY {key}"
                    )
                    for *names, blob in self.db.execute(sql):
                        yield ("vector", table, *names, _rounded(blob))


def _rounded(blob: bytes | None) -> tuple[float, ...] | None:
    if blob is None:
        return None
    return tuple(round(float(x), 4) for x in np.frombuffer(blob, dtype="<f4"))
