"""Reading the index: keyword and vector search, rows, groups, links, counts and the dump."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from engine.index.keywords import KeywordPlan, TermStats, plan_keywords
from engine.index.schema import CHUNK_SELECT, CHUNKS, FACT_SELECT, FACTS, ChunkRow, FactRow, marks
from engine.index.vectors import VectorMatrix, unit

Vectors = dict[int, np.ndarray[Any, np.dtype[np.float32]]]
#: Above this many rows, a term's document frequency is estimated from the newest this many.
DF_SAMPLE = 4096
#: Chunk rows kept between writes (:meth:`IndexReader.chunk_rows`): ≈ 2.4 KB each at the live shape,
#: whose 1,849 chunks fit; a search reads ≈ 100–200 of them.
ROW_CACHE = 2048
#: Small answers kept between writes (:meth:`IndexReader._until_write`): a few each search.
LOOKUP_CACHE = 1024

K = TypeVar("K")
V = TypeVar("V")


class UntilWrite(Generic[K, V]):
    """A dict kept until the index's next write: :meth:`fresh` returns it empty again whenever
    the connection's change count has moved since it was filled (or it holds ``most`` entries)."""

    def __init__(self, most: int | None = None) -> None:
        self.most = most
        self._changes = -1
        self._kept: dict[K, V] = {}

    def fresh(self, changes: int) -> dict[K, V]:
        if self._changes != changes or (self.most is not None and len(self._kept) >= self.most):
            self._changes, self._kept = changes, {}
        return self._kept

    def __len__(self) -> int:
        return len(self._kept)


def blob(vector: np.ndarray[Any, Any]) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


class IndexReader:
    """The read side of the index: searches and row reads over a connection of its own (WAL: a
    read never waits for the writer's transaction), and the in-memory copies it keeps — vector
    matrices, session vectors, term statistics, rows. The writer
    (:class:`~engine.index.db.IndexDB`) tells it what changed once each transaction has committed
    (:meth:`committed`, :meth:`forget_vectors`); until then the reader's copies and its connection
    agree on the rows as they were."""

    def __init__(self, db: Any, lock: threading.RLock, dim: int) -> None:
        self.db = db
        self.lock = lock
        self.dim = dim
        #: Counts the writer's commits: what is kept "until the next write" is kept until it moves.
        self.version = 0
        self._mutex = threading.Lock()  # the writer's hand-over (never waits for a search)
        self._matrices: dict[str, VectorMatrix] = {}
        self._touched: dict[str, set[int]] = {"chunks": set(), "facts": set()}
        self._group_cache: dict[str, tuple[int, np.ndarray[Any, Any] | None]] | None = None
        self._groups_touched: set[str] = set()
        self._stats: dict[str, tuple[int, dict[str, TermStats], int]] = {}
        self._rows: UntilWrite[int, ChunkRow] = UntilWrite()
        self._lookups: UntilWrite[tuple[Any, ...], Any] = UntilWrite(LOOKUP_CACHE)

    def committed(self, touched: dict[str, set[int]], groups: Iterable[str]) -> None:
        """A write transaction committed: it changed (or removed) the vectors of ``touched``
        (rowids by table) and the rows of the sessions ``groups``."""
        with self._mutex:
            for table, rowids in touched.items():
                self._touched[table].update(rowids)
            self._groups_touched.update(groups)
            self.version += 1

    def forget_vectors(self) -> None:
        """The vector tables were dropped (another model): reload everything on next use."""
        with self.lock, self._mutex:
            self._matrices.clear()
            self._group_cache = None
            for touched in self._touched.values():
                touched.clear()
            self.version += 1

    def _take(self, table: str) -> list[int]:
        with self._mutex:
            ids = list(self._touched[table])
            self._touched[table].clear()
        return ids

    def close(self) -> None:
        with self.lock:
            self.db.close()

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
        with self.lock:
            stats, rows = self._term_stats(table, terms)
            plan = plan_keywords(terms, stats, rows, budget)
            if not plan.terms or (informative_only and plan.uninformative):
                return [], plan
            w = ", ".join(f"{x:g}" for x in weights)
            where, args = f"{table}_fts MATCH ?", list[object]([_expression(plan.terms)])
            floor = None if plan.window is None else self._newest_floor(table, plan.window)
            if floor is not None:
                where += " AND rowid >= ?"
                args.append(floor)
            sql = (
                f"SELECT rowid, bm25({table}_fts, {w}) AS s FROM {table}_fts WHERE {where} ORDER BY s LIMIT ?"
            )
            found = [(int(r), -float(s)) for r, s in self.db.execute(sql, (*args, limit))]
        return found, plan

    def _term_stats(self, table: str, terms: Sequence[str]) -> tuple[dict[str, TermStats], int]:
        """Rows of ``<table>_fts`` (as bm25 counts them) and each term's document frequency —
        exact up to :data:`DF_SAMPLE` rows, else estimated from the newest ``DF_SAMPLE`` rows
        (a term not among them counts as rare). Cached until the next write."""
        changes = self.version
        cached = self._stats.get(table)
        if cached is None or cached[0] != changes:
            cached = self._stats[table] = (changes, {}, self._fts_rows(table))
        _, known, rows = cached
        missing = [t for t in terms if t not in known]
        if missing:
            floor = self._newest_floor(table, DF_SAMPLE) if rows > DF_SAMPLE else None
            for term in missing:
                sql = f"SELECT count(*) FROM {table}_fts WHERE {table}_fts MATCH ?"
                if floor is None:
                    df = int(self.db.execute(sql, (_expression([term]),)).fetchall()[0][0])
                else:
                    sql += " AND rowid >= ?"
                    seen = int(self.db.execute(sql, (_expression([term]), floor)).fetchall()[0][0])
                    df = max(1, seen * rows // DF_SAMPLE)
                known[term] = TermStats(df)
        return {t: known[t] for t in terms}, rows

    def subject_share(self, name: str) -> float:
        """Of the chunks whose words mention ``name`` (any column), the share whose subject
        (``speaker``) it is: near ½ for a person every other memory is by or about, near 0 for
        one only ever addressed or mentioned. Counted over the newest :data:`DF_SAMPLE` rows of a
        larger table; cached until the next write."""
        term = name.casefold()

        def read() -> float:
            sql = "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"
            args: list[Any] = []
            if self._fts_rows("chunks") > DF_SAMPLE:
                sql += " AND rowid >= ?"
                args = [self._newest_floor("chunks", DF_SAMPLE) or 0]
            quoted = _expression([term])
            mentions = int(self.db.execute(sql, (quoted, *args)).fetchall()[0][0])
            subject = int(self.db.execute(sql, (f"speaker : {quoted}", *args)).fetchall()[0][0])
            return subject / mentions if mentions else 0.0

        return float(self._until_write(("share", term), read))

    def _newest_floor(self, table: str, n: int) -> int | None:
        """The id of the ``n``-th newest row of ``table`` (None if it has fewer). Read from the
        keyword index's per-row sizes (``<table>_fts_docsize``, one tiny row per row of ``table``,
        same ids, kept in step by the triggers): stepping over the table's own rows, ≈ 2.4 KB
        each, read a page per row — 49 ms for 8,000 rows at 100,000 chunks against 0.1 ms."""
        sql = f"SELECT id FROM {table}_fts_docsize ORDER BY id DESC LIMIT 1 OFFSET ?"
        found = self.db.execute(sql, (n - 1,)).fetchall()
        return int(found[0][0]) if found else None

    def _fts_rows(self, table: str) -> int:
        """The row count FTS5's bm25 uses (the first varint of the table's 'averages' record)."""
        found = self.db.execute(f"SELECT block FROM {table}_fts_data WHERE id = 1").fetchall()
        if not found:
            return 0
        value = 0
        for i, byte in enumerate(bytes(found[0][0])[:9]):
            if i == 8:
                return (value << 8) | byte
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        return value

    def exists(self, table: str, expression: str) -> bool:
        """Whether any row of ``<table>_fts`` matches ``expression`` (no ranking); the answers
        are kept until the next write (a query's names are looked up on every search)."""

        def read() -> bool:
            sql = f"SELECT 1 FROM {table}_fts WHERE {table}_fts MATCH ? LIMIT 1"
            return bool(self.db.execute(sql, (expression,)).fetchall())

        return bool(self._until_write(("exists", table, expression), read))

    def _matrix(self, table: str) -> VectorMatrix:
        """The in-memory copy of ``vec_<table>``: loaded on first use, then kept in step."""
        matrix = self._matrices.get(table)
        if matrix is None:
            self._take(table)  # before the load: a commit after it is taken next time
            matrix = self._matrices[table] = VectorMatrix(self.dim)
            matrix.load(self.db.execute(f"SELECT rowid, embedding FROM vec_{table}"))
        elif ids := self._take(table):
            now = self._vectors(table, ids)
            for rowid in ids:
                vec = now.get(rowid)
                if vec is None:
                    matrix.remove(rowid)
                else:
                    matrix.upsert(rowid, vec)
        return matrix

    def knn(self, table: str, query: np.ndarray[Any, Any], k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine similarity)`` of the ``k`` nearest vectors."""
        if not self.vectors:
            return []
        with self.lock:
            return self._matrix(table).knn(query, k)

    def knn_vec0(self, table: str, query: np.ndarray[Any, Any], k: int) -> list[tuple[int, float]]:
        """The same search done by sqlite-vec itself (a full scan; the reference for tests)."""
        if not self.vectors:
            return []
        sql = f"SELECT rowid, distance FROM vec_{table} WHERE embedding MATCH ? AND k = ?"
        with self.lock:
            return [(int(r), 1.0 - float(d)) for r, d in self.db.execute(sql, (blob(query), k))]

    def cosines(self, table: str, query: np.ndarray[Any, Any], ids: Sequence[int]) -> dict[int, float]:
        """Cosine similarity of ``query`` to each of ``ids`` that has a vector."""
        if not self.vectors or not ids:
            return {}
        with self.lock:
            return self._matrix(table).cosines(query, ids)

    def _vectors(self, table: str, ids: Sequence[int]) -> Vectors:
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
        with self.lock:
            for rowid, blob in self.db.execute(sql, (json.dumps([int(i) for i in ids]),)):
                out[int(rowid)] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

    def chunk_vectors(self, ids: Sequence[int]) -> Vectors:
        return self._vectors("chunks", ids)

    def chunk_rows(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of ``ids`` that exist (ascending ids within each 500). The last
        :data:`ROW_CACHE` rows read are kept until the next write: the searches of one
        workspace keep meeting the same chunks, and reading ≈ 200 of them back from SQLite
        was the largest part of a hybrid search after the query embedding."""
        out: dict[int, ChunkRow] = {}
        with self.lock:
            kept = self._rows.fresh(self.version)
            for start in range(0, len(ids), 500):
                part = sorted(set(ids[start : start + 500]))
                found = {i: row for i in part if (row := kept.get(i)) is not None}
                missing = tuple(i for i in part if i not in found)
                if missing:
                    sql = f"{CHUNK_SELECT} WHERE id IN ({marks(len(missing))})"
                    fresh = {int(row[0]): ChunkRow(*row) for row in self.db.execute(sql, missing)}
                    if len(kept) + len(fresh) > ROW_CACHE:
                        kept.clear()
                    if len(fresh) <= ROW_CACHE:
                        kept.update(fresh)
                    found.update(fresh)
                out.update((i, found[i]) for i in part if i in found)
        return out

    def _until_write(self, key: tuple[Any, ...], read: Callable[[], Any]) -> Any:
        """``read()``, kept under ``key`` until the next write: the small lookups every search
        repeats — whether anything is embedded, the links of the best hits, a rare name's rows."""
        with self.lock:
            known = self._lookups.fresh(self.version)
            if key not in known:
                known[key] = read()
            return known[key]

    def rare_mentions(self, name: str, most: int, share: float = 0.01) -> list[int]:
        """Rows whose own words mention ``name``, if it is rare — in at most ``most`` rows, or
        ``share`` of all rows — else none (a name everyone mentions links nothing). Kept until
        the next write."""
        term = name.casefold()

        def read() -> tuple[int, ...]:
            stats, rows = self._term_stats("chunks", [term])
            if stats[term].df > max(most, int(rows * share)):
                return ()
            sql = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid LIMIT ?"
            return tuple(int(r) for (r,) in self.db.execute(sql, (f"text : {_expression([term])}", most)))

        return list(self._until_write(("rare", term, most, share), read))

    def memory_chunks(self, memories: Sequence[str]) -> list[ChunkRow]:
        """The first chunk of each of ``memories`` (for graph expansion)."""
        with self.lock:
            rows = self.db.execute(
                f"SELECT id FROM chunks WHERE chunk = 0 AND memory IN ({marks(len(memories))})",
                tuple(memories),
            ).fetchall()
        return list(self.chunk_rows([r for (r,) in rows]).values())

    def fact_rows(self, ids: Sequence[int] | None = None) -> dict[int, FactRow]:
        with self.lock:
            if ids is None:
                rows = self.db.execute(FACT_SELECT).fetchall()
            else:
                sql = f"{FACT_SELECT} WHERE id IN ({marks(len(ids))})"
                rows = self.db.execute(sql, tuple(ids)).fetchall()
        return {int(r[0]): FactRow(*r) for r in rows}

    def facts_by_memory(self, memories: Sequence[str]) -> dict[str, FactRow]:
        if not memories:
            return {}
        with self.lock:
            sql = f"{FACT_SELECT} WHERE memory IN ({marks(len(memories))})"
            rows = self.db.execute(sql, tuple(memories)).fetchall()
        return {r.memory: r for r in (FactRow(*row) for row in rows)}

    def groups(self, keys: Sequence[str]) -> dict[str, tuple[int, np.ndarray[Any, Any] | None]]:
        """``key → (rowid, mean vector or None)`` for the groups ``keys`` (kept in memory)."""
        with self.lock:
            cache = self._group_cache
            with self._mutex:
                stale = sorted(self._groups_touched)
                self._groups_touched.clear()
            if cache is None:
                cache = self._group_cache = self._read_groups(None)
            elif stale:
                for key in stale:
                    cache.pop(key, None)
                cache.update(self._read_groups(stale))
            return {k: cache[k] for k in keys if k in cache}

    def _read_groups(self, keys: Sequence[str] | None) -> dict[str, tuple[int, np.ndarray[Any, Any] | None]]:
        out: dict[str, tuple[int, np.ndarray[Any, Any] | None]] = {}
        sql = "SELECT key, id, vector FROM groups"
        args: tuple[str, ...] = ()
        if keys is not None:
            sql, args = sql + f" WHERE key IN ({marks(len(keys))})", tuple(keys)
        for key, rowid, blob in self.db.execute(sql, args):
            out[str(key)] = (int(rowid), None if blob is None else unit(np.frombuffer(blob, dtype="<f4")))
        return out

    def links_from(self, memories: Sequence[str]) -> list[tuple[str, str]]:
        """``(source memory, target memory)`` for the wikilinks of ``memories`` that resolve
        (kept until the next write)."""

        def read() -> tuple[tuple[str, str], ...]:
            sql = (
                "SELECT DISTINCT l.src, c.memory FROM links l JOIN chunks c "
                "ON c.chunk = 0 AND (c.name = l.target OR lower(c.memory) = l.target) "
                f"WHERE l.src IN ({marks(len(memories))}) AND c.memory != l.src ORDER BY l.src, c.memory"
            )
            return tuple((str(a), str(b)) for a, b in self.db.execute(sql, tuple(memories)))

        return list(self._until_write(("links", *memories), read))

    def any_embedded(self) -> bool:
        """Whether any chunk or fact has its vector (kept until the next write)."""

        def read() -> bool:
            sql = (
                "SELECT EXISTS (SELECT 1 FROM chunks WHERE pending = 0) "
                "OR EXISTS (SELECT 1 FROM facts WHERE pending = 0)"
            )
            return bool(self.db.execute(sql).fetchall()[0][0])

        return bool(self._until_write(("any_embedded",), read))

    def voices(self, memories: Sequence[str]) -> dict[str, str]:
        """Who wrote each of ``memories``, where the index worked it out (encoded:
        :func:`engine.index.voices.encode`); memories without it are left out."""

        def any_voices() -> bool:
            return bool(self.db.execute("SELECT EXISTS (SELECT 1 FROM voices)").fetchall()[0][0])

        if not memories or not self._until_write(("any_voices",), any_voices):
            return {}
        with self.lock:
            sql = f"SELECT memory, voices FROM voices WHERE memory IN ({marks(len(memories))})"
            return {str(m): str(v) for m, v in self.db.execute(sql, tuple(memories))}

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
            for row in self.db.execute(
                f"SELECT 'chunk', {CHUNKS.column_list} FROM chunks ORDER BY memory, chunk"
            ):
                yield row
            for row in self.db.execute(f"SELECT 'fact', {FACTS.column_list} FROM facts ORDER BY memory"):
                yield row
            yield from self.db.execute("SELECT 'link', src, target FROM links ORDER BY src, target")
            yield from self.db.execute("SELECT 'voices', memory, voices FROM voices ORDER BY memory")
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


def _expression(terms: Sequence[str]) -> str:
    """Terms as FTS5 strings joined by OR (the same quoting as ``recall.query.fts_expression``)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _rounded(blob: bytes | None) -> tuple[float, ...] | None:
    if blob is None:
        return None
    return tuple(round(float(x), 4) for x in np.frombuffer(blob, dtype="<f4"))
