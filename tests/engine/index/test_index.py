from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.embed.off import OffEmbedder
from engine.index.indexer import CACHE_DIR, CACHE_FILE, INDEX_DIR, INDEX_FILE
from engine.index.schema import SCHEMA_VERSION
from engine.recall.status import memory_status
from tests.engine.index.helpers import CALLER, EMBEDDER, GatedEmbedder, engine


def fill(e: object) -> None:
    from tests.engine.index.helpers import Engine

    assert isinstance(e, Engine)
    m = e.memory
    m.remember(CALLER, "Caroline: I went to an LGBTQ support group yesterday.")
    m.remember(CALLER, "Melanie: That sounds powerful. See [[notes]] too.", tags=["support"])
    m.remember(CALLER, "Long note.\n\n" + "\n\n".join("Paragraph about deploys. " * 20 for _ in range(6)))
    m.save_memory(CALLER, "Fjord", "database", "Postgres", "Fjord runs on Postgres")
    m.save_memory(CALLER, "Fjord", "database", "SQLite", scope="project:fjord")
    m.remember_note(CALLER, "Deployed the frontend to Fly.io")


@pytest.mark.req("engine:index")
def test_the_index_is_sqlite_with_wal_fts5_and_vectors_under_dot_index(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        fill(e)
        e.settle()
        db = e.indexer.db
        assert db.path == tmp_path / INDEX_DIR / INDEX_FILE
        assert db.db.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
        assert db.db.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION
        names = {r[0] for r in db.db.execute("SELECT name FROM sqlite_master")}
        assert {"chunks_fts", "facts_fts", "groups_fts", "vec_chunks", "vec_facts", "links"} <= names
        counts = db.reader.counts()
        assert counts["chunks"] >= 5 and counts["facts"] == 2 and counts["links"] == 1
        assert counts["chunks_pending"] == 0


@pytest.mark.req("engine:index")
@pytest.mark.parametrize("damage", ["version", "garbage"])
def test_a_stale_or_corrupt_index_is_rebuilt_from_the_store(tmp_path: Path, damage: str) -> None:
    with engine(tmp_path) as e:
        fill(e)
        e.settle()
        before = list(e.indexer.db.reader.dump())
    path = tmp_path / INDEX_DIR / INDEX_FILE
    if damage == "version":
        import apsw

        con = apsw.Connection(str(path))
        con.execute("PRAGMA user_version=999")
        con.close()
    else:
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.write_bytes(b"this is not a database" * 100)
    with engine(tmp_path) as e:
        assert e.indexer.db.rebuilt
        assert list(e.indexer.db.reader.dump()) == before


@pytest.mark.req("engine:rebuild")
def test_deleting_and_rebuilding_the_index_yields_the_same_rows(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        fill(e)
        e.memory.retire(CALLER, e.memory.remember(CALLER, "to be retired").id)
        e.settle()
        incremental = list(e.indexer.db.reader.dump())
    shutil.rmtree(tmp_path / INDEX_DIR / "index.sqlite", ignore_errors=True)
    for p in (tmp_path / INDEX_DIR).glob("index.sqlite*"):
        p.unlink()
    with engine(tmp_path) as e:
        rebuilt = list(e.indexer.db.reader.dump())
    assert rebuilt == incremental
    assert any(row[0] == "vector" for row in rebuilt)


@pytest.mark.req("store:hand-edits")
def test_hand_edits_are_picked_up_on_start_and_while_running(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        receipt = e.memory.remember(CALLER, "The kayak is red.")
        path = tmp_path / str(receipt.path)
    path.write_text(path.read_text(encoding="utf-8").replace("red", "turquoise"), encoding="utf-8")
    with engine(tmp_path) as e:  # on start: reconciled by content hash
        assert [h.memory for h in e.recall.search("turquoise kayak").hits] == [receipt.id]
        assert e.indexer.scan_once() is False  # nothing changed since
        added = tmp_path / "notes" / "Imported" / "hand" / "Boat Log.md"
        added.parent.mkdir(parents=True)
        added.write_text("---\nid: nte_handmade\n---\nThe canoe leaks at the stern.\n", encoding="utf-8")
        path.unlink()
        assert e.indexer.scan_once() is True  # while running: a cheap periodic scan
        e.settle()
        assert [h.memory for h in e.recall.search("canoe stern").hits][:1] == ["nte_handmade"]
        assert receipt.id not in [h.memory for h in e.recall.search("turquoise kayak").hits]


@pytest.mark.req("embed:background")
def test_embedding_runs_in_the_background_and_status_shows_the_backlog(tmp_path: Path) -> None:
    gated = GatedEmbedder()
    with engine(tmp_path, gated, settle=False) as e:
        receipt = e.memory.remember(CALLER, "Our staging database lives in Frankfurt.")
        assert memory_status(e.recall, CALLER)["index"]["waiting_for_embeddings"] >= 1
        reply = e.recall.get_context(CALLER, "staging database Frankfurt")
        assert reply["retrieval"] == "keyword"
        assert [n["id"] for n in reply["notes"]] == [receipt.id]
        gated.gate.set()
        e.settle()
        assert memory_status(e.recall, CALLER)["index"]["waiting_for_embeddings"] == 0
        assert e.recall.get_context(CALLER, "staging database Frankfurt")["retrieval"] == "hybrid"


@pytest.mark.req("embed:model-id")
def test_vectors_carry_model_and_dim_and_a_model_change_reembeds_from_the_cache(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        fill(e)
        e.settle()
        meta = dict(e.indexer.db.db.execute("SELECT key, value FROM meta").fetchall())
        assert meta == {"model_id": EMBEDDER.model_id, "dim": str(EMBEDDER.dim)}
        cached = e.indexer.cache.count(EMBEDDER.model_id) if e.indexer.cache else 0
        assert cached >= 6
    with engine(tmp_path, OffEmbedder()) as e:  # another model: its vectors are dropped
        meta = dict(e.indexer.db.db.execute("SELECT key, value FROM meta").fetchall())
        assert meta == {"model_id": "off", "dim": "0"}
        assert not any(r[0] == "vector" for r in e.indexer.db.reader.dump())
    shutil.rmtree(tmp_path / INDEX_DIR)  # what --reindex deletes: the cache lives outside it
    assert (tmp_path / CACHE_DIR / CACHE_FILE).exists()
    gated = GatedEmbedder()
    gated.gate.set()
    with engine(tmp_path, gated) as e:
        assert e.indexer.backlog() == 0
        assert gated.calls == 0  # every vector came from the cache


@pytest.mark.req("embed:off")
def test_with_embeddings_off_recall_is_keyword_only(tmp_path: Path) -> None:
    with engine(tmp_path, OffEmbedder()) as e:
        fill(e)
        reply = e.recall.get_context(CALLER, "LGBTQ support group")
        assert reply["retrieval"] == "keyword"
        assert reply["notes"] and "support group" in reply["notes"][0]["text"]
        status = memory_status(e.recall, CALLER)
        assert status["embedding"]["provider"] == "off"
        assert status["index"]["waiting_for_embeddings"] == 0


def test_each_table_is_declared_once_and_row_types_are_checked_against_it() -> None:
    from dataclasses import dataclass, fields

    from engine.index.docs import ChunkDoc
    from engine.index.schema import CHUNK_SELECT, CHUNKS, TABLES, Table

    assert CHUNKS.names[: len(fields(ChunkDoc))] == tuple(f.name for f in fields(ChunkDoc))
    assert "importance REAL," in TABLES and "memory TEXT NOT NULL," in TABLES and "scope TEXT," in TABLES
    assert CHUNK_SELECT.startswith("SELECT id, memory, chunk") and CHUNK_SELECT.endswith("FROM chunks")
    for name, _ in CHUNKS.fts:
        assert f"new.{name}" in TABLES

    @dataclass(frozen=True)
    class Wrong:
        id: int
        colour: str

    with pytest.raises(TypeError, match="colour"):
        Table("chunks", CHUNKS.columns).select(Wrong)


@pytest.mark.req("engine:rebuild")
def test_days_carried_from_a_dated_entry_follow_writes_and_deletions_like_a_rebuild(tmp_path: Path) -> None:
    """An undated memory carries the day of the dated entry before it (docs/recall.md); writing,
    re-dating or deleting that entry re-dates the memories after it — the rows are what a rebuild
    from the store gives."""
    with engine(tmp_path) as e:
        first = e.memory.remember(CALLER, "3 March 2021 — the boiler was serviced").id
        e.memory.remember(CALLER, "The engineer replaced a valve")
        e.memory.remember(CALLER, "and left the invoice on the table")
        e.settle()
        rows = {r.text: r for r in e.indexer.db.reader.memory_chunks(list(e.indexer._items))}
        assert rows["and left the invoice on the table"].grp.endswith("2021-03-03")
        e.memory.retire(CALLER, first)
        e.settle()
        rows = {r.text: r for r in e.indexer.db.reader.memory_chunks(list(e.indexer._items))}
        assert not rows["and left the invoice on the table"].grp.endswith("2021-03-03")
        e.memory.remember(CALLER, "4 April 2022 — the roof was checked")
        e.memory.remember(CALLER, "No leaks found")
        e.settle()
        incremental = list(e.indexer.db.reader.dump())
    for p in (tmp_path / INDEX_DIR).glob("index.sqlite*"):
        p.unlink()
    with engine(tmp_path) as e:
        rows = {r.text: r for r in e.indexer.db.reader.memory_chunks(list(e.indexer._items))}
        assert rows["No leaks found"].grp.endswith("2022-04-04")
        assert list(e.indexer.db.reader.dump()) == incremental
