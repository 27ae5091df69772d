"""Stopping the indexer mid-round is quiet (engine:surface): a stop that holds the workspace lock
(as the engine's stop does, to keep writes out) makes a round waiting for it give up without a
logged failure, and the process's stderr gets no traceback."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engine.index.indexer import Indexer
from engine.memory import Memory
from engine.store.workspace import Workspace
from tests.engine.index.helpers import CALLER, Clock, GatedEmbedder


@pytest.mark.req("engine:surface")
def test_a_round_the_stop_interrupts_logs_no_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.open()
    embedder = GatedEmbedder()
    indexer = Indexer(ws, embedder, scan_interval_s=None, settle_s=0.0)
    indexer.start()
    caplog.set_level(logging.WARNING)
    stopped = False
    try:
        assert indexer.wait_idle(60)
        Memory(ws, clock=Clock()).remember(CALLER, "The heron nests by the north pier.")
        assert embedder.entered.wait(60)  # a round is under way: embedding, writers still to do
        assert ws.lock.acquire(timeout=60)  # what the engine's stop does first (finish_writes)
        try:
            indexer.halt()
            embedder.gate.set()  # the round goes on to the writers, and waits for the lock
            stopped = indexer.stop(30)
        finally:
            ws.lock.release()
    finally:
        if not stopped:
            indexer.stop()
        ws.close()
    assert stopped, "the index threads did not stop"
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
