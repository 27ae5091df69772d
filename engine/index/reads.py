"""Reading the index: keyword and vector search, rows, groups, links, counts and the dump."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from engine.index.kept import Group, KeptGroups, KeptVectors, UntilWrite, Vectors
from engine.index.keywords import KeywordPlan, plan_keywords
from engine.index.pool import ReadConnections
from engine.index.schema import CHUNK_SELECT, CHUNKS, FACT_SELECT, FACTS, ChunkRow, FactRow, marks
from engine.index.terms import DF_SAMPLE, TermCounts, expression, fts_rows, newest_floor
from engine.index.vectors import VectorMatrix, unit

__all__ = ["IndexReader", "UntilWrite", "Vectors", "blob"]

#: Read connections at most: reads run SQLite and numpy with the interpreter lock released, so a
#: few overlap on a few cores; each more holds its own page cache and file descriptors.
READERS = 4
#: Chunk rows kept between writes (:meth:`IndexReader.chunk_rows`): ≈ 2.4 KB each at the live shape,
#: whose 1,849 chunks fit; a search reads ≈ 100–200 of them.
ROW_CACHE = 2048
#: Small answers kept between writes (:meth:`IndexReader._until_write`): a few each search.
LOOKUP_CACHE = 1024


def blob(vector: np.ndarray[Any, Any]) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


class IndexReader:
    """The read side of the index: searches and row reads on a bounded pool of connections of its
    own (:class:`~engine.index.pool.ReadConnections`; WAL: a read never waits for the writer's
    transaction, nor for another thread's read), and the in-memory copies it keeps — vector
    matrices, sessions, term statistics, rows (:mod:`engine.index.kept`). The writer
    (:class:`~engine.index.db.IndexDB`) tells it what changed once each transaction has committed
    (:meth:`committed`, :meth:`forget_vectors`); until then the reader's copies and its
    connections agree on the rows as they were."""

    def __init__(self, connect: Callable[[], Any], dim: int, readers: int = READERS) -> None:
        self.dim = dim
        self.connections = ReadConnections(connect, readers)
        #: Counts the writer's commits: what is kept "until the next write" is kept until it moves.
        self.version = 0
        self._mutex = threading.Lock()  # the writer's hand-over (never waits for a search)
        self._matrices = KeptVectors(dim)
        self._groups = KeptGroups()
        self._terms = TermCounts()
        self._rows: UntilWrite[int, ChunkRow] = UntilWrite()
        self._lookups: UntilWrite[tuple[Any, ...], Any] = UntilWrite(LOOKUP_CACHE)

    def committed(self, touched: dict[str, set[int]], groups: Iterable[str]) -> None:
        """A write transaction committed: it changed (or removed) the vectors of ``touched``
        (rowids by table) and the rows of the sessions ``groups``."""
        self._matrices.committed(touched)
        self._groups.committed(groups)
        with self._mutex:
            self.version += 1

    def forget_vectors(self) -> None:
        """The vector tables were dropped (another model): reload everything on next use."""
        self._matrices.forget()
        self._groups.forget()
        with self._mutex:
            self.version += 1

    def reading(self) -> contextlib.AbstractContextManager[Any]:
        """A connection of the pool, this thread's until the block ends (every read within it,
        on this thread, uses it)."""
        return self.connections.lend()

    def close(self) -> None:
        self.connections.close()

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
        with self.reading() as db:
            return [(int(r), -float(s)) for r, s in db.execute(sql, (expression, limit))]

    def keyword(
        self,
        table: str,
        terms: Sequence[str],
        weights: Sequence[float],
        limit: int,
        budget: int,
        *,
        informative_only: bool = False,
    ) -> tuple[list[tuple[int, float]], KeywordPlan]:
        """Like :meth:`fts` over ``terms`` joined by OR, scoring only what bm25 can tell apart
        (:func:`~engine.index.keywords.plan_keywords`); returns the matches and the plan. With
        ``informative_only``, an uninformative plan is not run at all."""
        with self.reading() as db:
            stats, rows = self._terms.get(db, table, terms, self.version)
            plan = plan_keywords(terms, stats, rows, budget)
            if not plan.terms or (informative_only and plan.uninformative):
                return [], plan
            w = ", ".join(f"{x:g}" for x in weights)
            where, args = f"{table}_fts MATCH ?", list[object]([expression(plan.terms)])
            floor = None if plan.window is None else newest_floor(db, table, plan.window)
            if floor is not None:
                where += " AND rowid >= ?"
                args.append(floor)
            sql = (
                f"SELECT rowid, bm25({table}_fts, {w}) AS s FROM {table}_fts WHERE {where} ORDER BY s LIMIT ?"
            )
            found = [(int(r), -float(s)) for r, s in db.execute(sql, (*args, limit))]
        return found, plan

    def subject_share(self, name: str) -> float:
        """Of the chunks whose words mention ``name`` (any column), the share whose subject
        (``speaker``) it is: near ½ for a person every other memory is by or about, near 0 for
        one only ever addressed or mentioned. Counted over the newest :data:`DF_SAMPLE` rows of a
        larger table; cached until the next write."""
        term = name.casefold()

        def read(db: Any) -> float:
            sql = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"
            args: list[Any] = []
            if fts_rows(db, "chunks") > DF_SAMPLE:
                sql += " AND rowid >= ?"
                args = [newest_floor(db, "chunks", DF_SAMPLE) or 0]
            quoted = expression([term])
            mentions = int(db.execute(sql, (quoted, *args)).fetchall()[0][0])
            subject = int(db.execute(sql, (f"speaker : {quoted}", *args)).fetchall()[0][0])
            return subject / mentions if mentions else 0.0

        return float(self._until_write(("share", term), read))

    def exists(self, table: str, expression: str) -> bool:
        """Whether any row of ``<table>_fts`` matches ``expression`` (no ranking); the answers
        are kept until the next write (a query's names are looked up on every search)."""

        def read(db: Any) -> bool:
            sql = f"SELECT 1 FROM {table}_fts WHERE {table}_fts MATCH ? LIMIT 1"
            return bool(db.execute(sql, (expression,)).fetchall())

        return bool(self._until_write(("exists", table, expression), read))

    def knn(self, table: str, query: np.ndarray[Any, Any], k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine similarity)`` of the ``k`` nearest vectors."""
        if not self.vectors:
            return []
        with self.reading() as db, self._matrix(db, table) as matrix:
            return matrix.knn(query, k)

    def _matrix(self, db: Any, table: str) -> contextlib.AbstractContextManager[VectorMatrix]:
        """The in-memory copy of ``vec_<table>``, held for the block: loaded on first use, then
        kept in step with what each committed write touched."""
        return self._matrices.matrix(
            table,
            lambda: db.execute(f"SELECT rowid, embedding FROM vec_{table}"),
            lambda ids: self._vectors(db, table, ids),
        )

    def knn_vec0(self, table: str, query: np.ndarray[Any, Any], k: int) -> list[tuple[int, float]]:
        """The same search done by sqlite-vec itself (a full scan; the reference for tests)."""
        if not self.vectors:
            return []
        sql = f"SELECT rowid, distance FROM vec_{table} WHERE embedding MATCH ? AND k = ?"
        with self.reading() as db:
            return [(int(r), 1.0 - float(d)) for r, d in db.execute(sql, (blob(query), k))]

    def cosines(self, table: str, query: np.ndarray[Any, Any], ids: Sequence[int]) -> dict[int, float]:
        """Cosine similarity of ``query`` to each of ``ids`` that has a vector."""
        if not self.vectors or not ids:
            return {}
        with self.reading() as db, self._matrix(db, table) as matrix:
            return matrix.cosines(query, ids)

    def _vectors(self, db: Any, table: str, ids: Sequence[int]) -> Vectors:
        out: Vectors = {}
        if not self.vectors or not ids:
            return out
        # One point lookup per id: vec0 answers ``rowid = ?`` from its index but ``rowid IN (…)``
        # with a scan of the whole table, which made every write's session refresh grow with the
        # workspace (perf:write).
        sql = (
            f"SELECT v.rowid, v.embedding FROM json_each(?) AS j CROSS JOIN vec_{table} AS v "
            "ON v.rowid = j.value"
        )
        for rowid, data in db.execute(sql, (json.dumps([int(i) for i in ids]),)):
            out[int(rowid)] = np.frombuffer(data, dtype="<f4").astype(np.float32)
        return out

    def chunk_vectors(self, ids: Sequence[int]) -> Vectors:
        with self.reading() as db:
            return self._vectors(db, "chunks", ids)

    def chunk_rows(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of ``ids`` that exist (ascending ids within each 500). The last
        :data:`ROW_CACHE` rows read are kept until the next write: the searches of one
        workspace keep meeting the same chunks, and reading ≈ 200 of them back from SQLite
        was the largest part of a hybrid search after the query embedding."""
        out: dict[int, ChunkRow] = {}
        kept = self._rows.fresh(self.version)
        with self.reading() as db:
            for start in range(0, len(ids), 500):
                part = sorted(set(ids[start : start + 500]))
                found = {i: row for i in part if (row := kept.get(i)) is not None}
                missing = tuple(i for i in part if i not in found)
                if missing:
                    sql = f"{CHUNK_SELECT} WHERE id IN ({marks(len(missing))})"
                    fresh = {int(row[0]): ChunkRow(*row) for row in db.execute(sql, missing)}
                    if len(kept) + len(fresh) > ROW_CACHE:
                        kept.clear()
                    if len(fresh) <= ROW_CACHE:
                        kept.update(fresh)
                    found.update(fresh)
                out.update((i, found[i]) for i in part if i in found)
        return out

    def _until_write(self, key: tuple[Any, ...], read: Callable[[Any], Any]) -> Any:
        """``read(connection)``, kept under ``key`` until the next write: the small lookups every
        search repeats — whether anything is embedded, the links of the best hits, a rare name's
        rows. Two threads asking at once may both read it; either answer is the same."""
        known = self._lookups.fresh(self.version)
        if key in known:
            return known[key]
        with self.reading() as db:
            value = known[key] = read(db)
        return value

    def rare_mentions(self, name: str, most: int, share: float = 0.01) -> list[int]:
        """Rows whose own words mention ``name``, if it is rare — in at most ``most`` rows, or
        ``share`` of all rows — else none (a name everyone mentions links nothing). Kept until
        the next write."""
        term = name.casefold()

        def read(db: Any) -> tuple[int, ...]:
            stats, rows = self._terms.get(db, "chunks", [term], self.version)
            if stats[term].df > max(most, int(rows * share)):
                return ()
            sql = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid LIMIT ?"
            return tuple(int(r) for (r,) in db.execute(sql, (f"text : {expression([term])}", most)))

        return list(self._until_write(("rare", term, most, share), read))

    def memory_chunks(self, memories: Sequence[str]) -> list[ChunkRow]:
        """The first chunk of each of ``memories`` (for graph expansion)."""
        with self.reading() as db:
            rows = db.execute(
                f"SELECT id FROM chunks WHERE chunk = 0 AND memory IN ({marks(len(memories))})",
                tuple(memories),
            ).fetchall()
            return list(self.chunk_rows([r for (r,) in rows]).values())

    def fact_rows(self, ids: Sequence[int] | None = None) -> dict[int, FactRow]:
        with self.reading() as db:
            if ids is None:
                rows = db.execute(FACT_SELECT).fetchall()
            else:
                sql = f"{FACT_SELECT} WHERE id IN ({marks(len(ids))})"
                rows = db.execute(sql, tuple(ids)).fetchall()
        return {int(r[0]): FactRow(*r) for r in rows}

    def facts_by_memory(self, memories: Sequence[str]) -> dict[str, FactRow]:
        if not memories:
            return {}
        with self.reading() as db:
            sql = f"{FACT_SELECT} WHERE memory IN ({marks(len(memories))})"
            rows = db.execute(sql, tuple(memories)).fetchall()
        return {r.memory: r for r in (FactRow(*row) for row in rows)}

    def groups(self, keys: Sequence[str]) -> dict[str, Group]:
        """``key → (rowid, mean vector or None)`` for the groups ``keys`` (kept in memory)."""
        with self.reading() as db:
            return self._groups.get(keys, lambda stale: _read_groups(db, stale))

    def links_from(self, memories: Sequence[str]) -> list[tuple[str, str]]:
        """``(source memory, target memory)`` for the wikilinks of ``memories`` that resolve
        (kept until the next write)."""

        def read(db: Any) -> tuple[tuple[str, str], ...]:
            sql = (
                "SELECT DISTINCT l.src, c.memory FROM links l JOIN chunks c "
                "ON c.chunk = 0 AND (c.name = l.target OR lower(c.memory) = l.target) "
                f"WHERE l.src IN ({marks(len(memories))}) AND c.memory != l.src ORDER BY l.src, c.memory"
            )
            return tuple((str(a), str(b)) for a, b in db.execute(sql, tuple(memories)))

        return list(self._until_write(("links", *memories), read))

    def any_embedded(self) -> bool:
        """Whether any chunk or fact has its vector (kept until the next write)."""

        def read(db: Any) -> bool:
            sql = (
                "SELECT EXISTS (SELECT 1 FROM chunks WHERE pending = 0) "
                "OR EXISTS (SELECT 1 FROM facts WHERE pending = 0)"
            )
            return bool(db.execute(sql).fetchall()[0][0])

        return bool(self._until_write(("any_embedded",), read))

    def voices(self, memories: Sequence[str]) -> dict[str, str]:
        """Who wrote each of ``memories``, where the index worked it out (encoded:
        :func:`engine.index.voices.encode`); memories without it are left out."""

        def any_voices(db: Any) -> bool:
            return bool(db.execute("SELECT EXISTS (SELECT 1 FROM voices)").fetchall()[0][0])

        if not memories or not self._until_write(("any_voices",), any_voices):
            return {}
        with self.reading() as db:
            sql = f"SELECT memory, voices FROM voices WHERE memory IN ({marks(len(memories))})"
            return {str(m): str(v) for m, v in db.execute(sql, tuple(memories))}

    def counts(self) -> dict[str, int]:
        with self.reading() as db:
            one = db.execute
            return {
                "chunks": int(one("SELECT count(*) FROM chunks").fetchall()[0][0]),
                "facts": int(one("SELECT count(*) FROM facts").fetchall()[0][0]),
                "chunks_pending": int(one("SELECT count(*) FROM chunks WHERE pending = 1").fetchall()[0][0]),
                "facts_pending": int(one("SELECT count(*) FROM facts WHERE pending = 1").fetchall()[0][0]),
                "groups_dirty": int(one("SELECT count(*) FROM groups WHERE dirty = 1").fetchall()[0][0]),
                "links": int(one("SELECT count(*) FROM links").fetchall()[0][0]),
            }

    def dump(self) -> Iterator[tuple[Any, ...]]:
        """Every row in a stable order, rowids left out (for the rebuild test, ``engine:rebuild``);
        read whole before the first is given, so the connection is back in the pool by then."""
        with self.reading() as db:
            return iter(list(self._dump(db)))

    def _dump(self, db: Any) -> Iterator[tuple[Any, ...]]:
        yield from db.execute(f"SELECT 'chunk', {CHUNKS.column_list} FROM chunks ORDER BY memory, chunk")
        yield from db.execute(f"SELECT 'fact', {FACTS.column_list} FROM facts ORDER BY memory")
        yield from db.execute("SELECT 'link', src, target FROM links ORDER BY src, target")
        yield from db.execute("SELECT 'voices', memory, voices FROM voices ORDER BY memory")
        for key, text, data, dirty in db.execute("SELECT key, text, vector, dirty FROM groups ORDER BY key"):
            yield ("group", key, text, _rounded(data), dirty)
        yield from db.execute("SELECT 'meta', key, value FROM meta ORDER BY key")
        if self.vectors:
            for table, key in (("chunks", "memory, chunk"), ("facts", "memory")):
                sql = (
                    f"SELECT {key}, v.embedding FROM {table} t "
                    f"JOIN vec_{table} v ON v.rowid = t.id ORDER BY {key}"
                )
                for *names, data in db.execute(sql):
                    yield ("vector", table, *names, _rounded(data))


def _read_groups(db: Any, keys: Sequence[str] | None) -> dict[str, Group]:
    out: dict[str, Group] = {}
    sql = "SELECT key, id, vector FROM groups"
    args: tuple[str, ...] = ()
    if keys is not None:
        sql, args = sql + f" WHERE key IN ({marks(len(keys))})", tuple(keys)
    for key, rowid, data in db.execute(sql, args):
        out[str(key)] = (int(rowid), None if data is None else unit(np.frombuffer(data, dtype="<f4")))
    return out


def _rounded(data: bytes | None) -> tuple[float, ...] | None:
    if data is None:
        return None
    return tuple(round(float(x), 4) for x in np.frombuffer(data, dtype="<f4"))
