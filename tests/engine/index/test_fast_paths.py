"""The fast paths of recall's reads: the in-memory vector matrix and the keyword plan (pure),
checked against what sqlite-vec and FTS5 themselves answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.index import reads
from engine.index.keywords import KeywordPlan, TermStats, plan_keywords
from engine.index.schema import CHUNK_SELECT, CHUNK_WEIGHTS, ChunkRow, marks
from engine.index.vectors import VectorMatrix
from tests.engine.index.helpers import CALLER, engine


def _unit_rows(n: int, dim: int, seed: int = 1) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def _blobs(rows: np.ndarray, first_id: int = 1) -> list[tuple[int, bytes]]:
    return [(first_id + i, r.astype("<f4").tobytes()) for i, r in enumerate(rows)]


def test_exact_matrix_finds_the_true_nearest_vectors_and_follows_updates() -> None:
    rows = _unit_rows(300, 32)
    m = VectorMatrix(32)
    m.load(_blobs(rows))
    q = rows[7] + 0.01
    truth = np.argsort(-(rows @ (q / np.linalg.norm(q))))[:10] + 1
    found = m.knn(q, 10)
    assert [r for r, _ in found] == [int(t) for t in truth]
    assert found[0][0] == 8 and found[0][1] == pytest.approx(1.0, abs=1e-2)
    m.remove(8)
    assert 8 not in [r for r, _ in m.knn(q, 10)] and m.get(8) is None
    m.upsert(1000, rows[7])  # a new row: found at once
    assert m.knn(q, 1)[0][0] == 1000
    m.upsert(1000, -rows[7])  # changed in place
    assert m.knn(q, 300)[-1][0] == 1000 and len(m) == 300
    expected = {1: pytest.approx(1.0), 1000: pytest.approx(-float(rows[0] @ rows[7]))}
    assert m.cosines(rows[0], [1, 8, 1000]) == expected
    for i in range(2, 250):  # many removals compact the matrix; what is left still answers right
        m.remove(i)
    assert sorted(r for r, _ in m.knn(q, 100)) == [1, *range(250, 301), 1000]


def test_beyond_exact_rows_bits_prefilter_and_rescoring_keep_the_nearest() -> None:
    centres = _unit_rows(300, 384, seed=3)
    noise = _unit_rows(3000, 384, seed=4)
    rows = np.repeat(centres, 10, axis=0) + 0.6 * noise  # 300 topics of 10 similar vectors
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    m = VectorMatrix(384, exact_rows=1000)
    m.load(_blobs(rows))
    assert m.quantized
    for topic in range(0, 300, 15):
        q = centres[topic] + 0.6 * _unit_rows(1, 384, seed=topic)[0]
        found = m.knn(q, 10)
        assert {r for r, _ in found} == set(range(topic * 10 + 1, topic * 10 + 11))
        exact = rows[[r - 1 for r, _ in found]] @ (q / np.linalg.norm(q))
        assert np.allclose([c for _, c in found], exact, atol=2e-3)  # rescored from float16
        assert found == sorted(found, key=lambda rc: -rc[1])
    small = VectorMatrix(384, exact_rows=10)
    for i, r in enumerate(rows[:20]):  # growing past exact_rows switches representation
        small.upsert(i + 1, r)
    assert small.quantized and small.knn(rows[5], 1)[0][0] == 6


@pytest.mark.parametrize("dim", [384, 100])
def test_quantized_matrix_kept_in_step_answers_as_one_loaded_from_scratch(dim: int) -> None:
    """The sign bits (64-bit words, one column per row; a dimension count not a multiple of 64
    padded with zeros) follow upserts, removals, growth and compaction: the same rows loaded afresh
    give the same nearest rows and cosines."""
    rows = _unit_rows(1200, dim, seed=5)
    m = VectorMatrix(dim, exact_rows=500)
    m.load(_blobs(rows[:600]))
    for i in range(600, 1200):  # grows past its first capacity
        m.upsert(i + 1, rows[i])
    for i in range(0, 1200, 2):  # removes half: compacts
        m.remove(i + 1)
    for i in range(1, 200, 2):  # changes some in place
        m.upsert(i + 1, -rows[i])
    kept = {i + 1: (-rows[i] if i < 200 else rows[i]) for i in range(1, 1200, 2)}
    fresh = VectorMatrix(dim, exact_rows=500)
    fresh.load([(r, v.astype("<f4").tobytes()) for r, v in kept.items()])
    assert m.quantized and fresh.quantized and len(m) == len(fresh) == 600
    for rowid in kept:  # each row's sign bits, wherever it sits
        assert (m._bits[:, m._pos[rowid]] == fresh._bits[:, fresh._pos[rowid]]).all()
    for q in _unit_rows(20, dim, seed=6):
        mine, ref = m.knn(q, 30), fresh.knn(q, 30)
        overlap = {r for r, _ in mine} & {r for r, _ in ref}
        assert len(overlap) >= 28  # near-ties may swap: float16 rounds an upsert and a load apart
        cos = fresh.cosines(q, [r for r, _ in mine])
        assert np.allclose([c for _, c in mine], [cos[r] for r, _ in mine], atol=1e-3)


def test_keyword_plan_drops_terms_bm25_gives_no_weight_unless_nothing_else_is_left() -> None:
    stats = {"the": TermStats(900), "fjord": TermStats(3), "deploy": TermStats(400), "zz": TermStats(0)}
    assert plan_keywords(["the", "fjord", "zz"], stats, 1000, 8000) == KeywordPlan(("fjord",), None, ("the",))
    everywhere = KeywordPlan(("the",), None, (), uninformative=True)
    assert plan_keywords(["the", "zz"], stats, 1000, 8000) == everywhere  # all common: kept
    assert plan_keywords(["zz"], stats, 1000, 8000) == KeywordPlan(())
    assert plan_keywords(["unknown"], {}, 1000, 8000).terms == ("unknown",)
    big = {"a": TermStats(40_000), "b": TermStats(300), "c": TermStats(6_000), "d": TermStats(60_000)}
    plan = plan_keywords(["a", "b", "c", "d"], big, 100_000, 8_000)
    assert plan == KeywordPlan(("b", "c"), None, ("d", "a"))  # rarest first within the budget
    assert plan_keywords(["c", "a"], big, 100_000, 5_000) == KeywordPlan(("c",), 5_000, ("a",))
    common = plan_keywords(["a", "d"], big, 60_000, 8_000)  # all common: the rarest, newest rows
    assert common == KeywordPlan(("a",), 8_000, ("d",), uninformative=True)


def test_index_reads_agree_with_sqlite_vec_and_fts5(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        words = [
            "alpha",
            "beta",
            "gamma",
            "delta",
            "fjord",
            "kestrel",
            "marmot",
            "quartz",
            "tundra",
            "walrus",
            "yarrow",
            "zephyr",
        ]
        for i in range(60):  # each word in 5 notes (and, as context, in their neighbours)
            e.memory.remember(CALLER, f"Note {i}: {words[i % 12]} with common words")
        e.settle()
        db = e.indexer.db.reader
        q = e.indexer.embedder.embed_query("a marmot near the fjord")
        mine, ref = db.knn("chunks", q, 20), db.knn_vec0("chunks", q, 20)
        assert [r for r, _ in mine] == [r for r, _ in ref]
        assert np.allclose([c for _, c in mine], [c for _, c in ref], atol=1e-5)
        e.memory.remember(CALLER, "A marmot sat by the fjord all day")  # written after the matrix loaded
        e.settle()
        assert [r for r, _ in db.knn("chunks", q, 5)] == [r for r, _ in db.knn_vec0("chunks", q, 5)]
        terms = ["common", "marmot", "words"]
        found, plan = db.keyword("chunks", terms, CHUNK_WEIGHTS, 100, 8000)
        assert plan.terms == ("marmot",) and set(plan.dropped) == {"common", "words"}
        reference = db.fts("chunks", '"common" OR "marmot" OR "words"', CHUNK_WEIGHTS, 100)
        marmots = [r for r, _ in reference][: len(found)]
        assert {r for r, _ in found} == set(marmots)  # the full query ranks exactly these first
        assert db.exists("chunks", '"kestrel"') and not db.exists("chunks", '"nowhere"')


def test_kept_rows_and_name_lookups_follow_every_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunk rows and ``exists`` answers are kept between writes (engine/index/reads.py): what
    they give is always what SQLite gives now, and the rows kept stay within ``ROW_CACHE``."""
    with engine(tmp_path) as e:
        receipts = [e.memory.remember(CALLER, f"Note {i}: the kestrel nests by the quarry") for i in range(6)]
        e.settle()
        db = e.indexer.db.reader

        def fresh(ids: list[int]) -> dict[int, ChunkRow]:
            sql = f"{CHUNK_SELECT} WHERE id IN ({marks(len(ids))})"
            with db.lock:
                return {int(r[0]): ChunkRow(*r) for r in db.db.execute(sql, tuple(ids))}

        ids = sorted(fresh(list(range(1, 100))))
        asked = [ids[3], 999_999, ids[0], ids[3], *ids]  # unordered, repeated, one missing
        assert db.chunk_rows(asked) == fresh(ids) and list(db.chunk_rows(asked)) == ids
        assert db.chunk_rows(ids) == fresh(ids)  # from what was kept
        assert [r.state for r in db.chunk_rows(ids).values() if r.memory == receipts[0].id] == ["live"]
        assert not db.exists("chunks", '"walrus"')

        e.memory.remember(CALLER, "A walrus hauled out by the quarry")
        e.memory.retire(CALLER, receipts[0].id)
        e.settle()
        now = sorted(fresh(list(range(1, 100))))
        assert now != ids and db.chunk_rows(now) == fresh(now) and db.chunk_rows(ids) == fresh(ids)
        kept_then = [r for r in db.chunk_rows(now).values() if r.memory == receipts[0].id]
        assert all(r.state != "live" for r in kept_then)  # the row kept before the retire is not served
        assert db.exists("chunks", '"walrus"')

        monkeypatch.setattr(reads, "ROW_CACHE", 3)
        with e.indexer.db.transaction():  # a write (through the writer): nothing kept is used
            e.indexer.db.db.execute("UPDATE chunks SET importance = importance")
        assert db.chunk_rows(now) == fresh(now) and len(db._rows) <= 3
        assert db.chunk_rows(now[:2]) == fresh(now[:2]) and len(db._rows) == 2
        assert db.chunk_rows(now[2:4]) == fresh(now[2:4]) and len(db._rows) <= 3


def test_newest_floor_is_the_tables_own_nth_newest_id(tmp_path: Path) -> None:
    """The keyword plan's window and the sampled term counts start at the ``n``-th newest row: read
    from ``<table>_fts_docsize`` (tiny rows) it is the id the table itself gives, after inserts,
    rewrites and deletes alike, and None past the last row."""
    with engine(tmp_path) as e:
        receipts = [e.memory.remember(CALLER, f"Note {i}: the kestrel nests by the quarry") for i in range(8)]
        e.memory.remember(CALLER, "Dana works at the quarry", "Dana", "works at", "the quarry")
        e.settle()
        e.memory.retire(CALLER, receipts[2].id)
        e.settle()
        db = e.indexer.db.reader
        with db.lock:
            db.db.execute(
                "DELETE FROM chunks WHERE id IN (SELECT id FROM chunks ORDER BY id LIMIT 1 OFFSET 3)"
            )
            for table in ("chunks", "facts", "groups"):
                ids = [int(r) for (r,) in db.db.execute(f"SELECT id FROM {table} ORDER BY id DESC")]
                assert ids, table
                assert [db._newest_floor(table, n) for n in range(1, len(ids) + 2)] == [*ids, None]


def test_kept_lookups_follow_every_write(tmp_path: Path) -> None:
    """Whether anything is embedded, the links of a set of memories and a rare name's rows are
    kept between writes (``IndexReader._until_write``): each answer is what SQLite gives now."""
    with engine(tmp_path) as e:
        db = e.indexer.db.reader
        assert not db.any_embedded()
        target = e.memory.remember(CALLER, "Osprey nests on the pylon by the estuary")
        source = e.memory.remember(CALLER, "Ask Wilhelmina about the kestrel survey")
        e.settle()
        assert db.any_embedded()
        assert db.links_from([source.id]) == []
        rare = db.rare_mentions("Wilhelmina", 3)
        assert [r.memory for r in db.chunk_rows(rare).values()] == [source.id]
        assert db.links_from([source.id]) == [] and db.rare_mentions("Wilhelmina", 3) == rare  # kept

        linking = e.memory.remember(CALLER, f"Wilhelmina's survey notes: see [[{target.id}]]")
        e.settle()
        assert db.links_from([linking.id]) == [(linking.id, target.id)]
        assert db.links_from([source.id]) == []
        now = db.rare_mentions("Wilhelmina", 3)
        assert sorted(r.memory for r in db.chunk_rows(now).values()) == sorted([source.id, linking.id])
        e.memory.retire(CALLER, target.id)
        e.settle()
        with db.lock:
            sql = "SELECT count(*) FROM chunks WHERE memory = ?"
            still = db.db.execute(sql, (target.id,)).fetchall()[0][0]
        assert db.links_from([linking.id]) == ([(linking.id, target.id)] if still else [])
