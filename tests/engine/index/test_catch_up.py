"""The start-up reconcile in the background, and the per-memory size limit of the index."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.embed.off import OffEmbedder
from engine.index.indexer import INDEX_DIR, Indexer
from engine.memory import Memory
from engine.recall.context import Recall
from engine.recall.status import memory_status
from engine.scope import Caller
from engine.store.workspace import Workspace
from tests.engine.index.helpers import CALLER, Clock


def _store(root: Path, notes: int = 30) -> list[str]:
    """A store written without an index (as after an import, or by hand)."""
    ws = Workspace(root)
    ws.open()
    try:
        memory = Memory(ws, clock=Clock())
        ids = [memory.remember(CALLER, f"note {i} about the heron by pier {i}").id for i in range(notes)]
        memory.save_memory(CALLER, "Fjord", "database", "Postgres")
        return ids
    finally:
        ws.close()


def _open(root: Path, **kwargs: Any) -> tuple[Workspace, Indexer]:
    ws = Workspace(root)
    ws.open()
    return ws, Indexer(ws, OffEmbedder(), scan_interval_s=None, **kwargs)


@pytest.mark.req("engine:index")
def test_the_start_up_reconcile_runs_in_the_background_and_reports_progress(tmp_path: Path) -> None:
    _store(tmp_path)
    ws, indexer = _open(tmp_path)
    try:
        with ws.lock:  # a writer holds the store: start must not wait for it
            indexer.start(catch_up_in_background=True)
            assert indexer.progress.state == "catching_up"
            status = memory_status(Recall(indexer), CALLER)  # the lock is re-entrant for this thread
            assert status["index"]["state"] == "catching_up" and status["index"]["chunks"] == 0
        assert indexer.wait_idle(60)
        assert indexer.progress.to_json() == {"state": "ready", "done": 31, "total": 31}
        rows = list(indexer.db.reader.dump())
    finally:
        indexer.stop()
        ws.close()
    shutil.rmtree(tmp_path / INDEX_DIR)
    ws, blocking = _open(tmp_path)
    try:
        blocking.start()  # the reconcile in the foreground, as before
        assert blocking.wait_idle(60)
        assert list(blocking.db.reader.dump()) == rows  # the same rows as a fresh reconcile in the foreground
    finally:
        blocking.stop()
        ws.close()


@pytest.mark.req("engine:index")
def test_a_write_during_the_catch_up_is_not_undone_by_it(tmp_path: Path) -> None:
    ids = _store(tmp_path, notes=5)
    retired = ids[-1]  # the catch-up reaches it last (same stream, newest)
    ws, indexer = _open(tmp_path)
    memory = Memory(ws, clock=Clock())
    real_put = indexer.db.put_memory
    done: list[str] = []

    def put_memory(memory_id: str, *args: Any) -> bool:
        if not done:  # while the catch-up is under way, a client retires the last note
            done.append(memory_id)
            memory.retire(CALLER, retired)
        return real_put(memory_id, *args)

    indexer.db.put_memory = put_memory  # type: ignore[method-assign,assignment]
    try:
        indexer.start(catch_up_in_background=True)
        assert indexer.wait_idle(60)
        assert done and done[0] != retired
        indexed = set(indexer.db.chunk_hashes())
        assert retired not in indexed and set(ids[:-1]) <= indexed
    finally:
        indexer.stop()
        ws.close()


@pytest.mark.req("engine:index")
def test_a_memory_over_the_size_limit_is_kept_but_not_indexed_and_named(tmp_path: Path) -> None:
    ids = _store(tmp_path, notes=2)
    big = tmp_path / "notes" / "dropped" / "big.md"
    big.parent.mkdir(parents=True)
    big.write_text("heron " * 2000)  # 12,000 bytes
    ws, indexer = _open(tmp_path, max_item_bytes=10_000)
    try:
        indexer.start(catch_up_in_background=True)
        assert indexer.wait_idle(60)
        status = memory_status(Recall(indexer), CALLER)
        assert status["index"]["not_indexed"] == 1
        assert status["not_indexed"] == [
            {"path": "notes/dropped/big.md", "bytes": 12_000, "reason": "larger than 10,000 bytes"}
        ]
        assert status["counts"]["note"]["live"] == 3  # still in the store
        assert set(indexer.db.chunk_hashes()) == set(ids)
        pinned = memory_status(Recall(indexer), Caller(pinned_scope="project:x"))
        assert pinned["not_indexed"] == [] and pinned["index"]["not_indexed"] == 1
    finally:
        indexer.stop()
        ws.close()
