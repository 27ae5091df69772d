"""The background indexer waits for a burst of writes to settle, then embeds it in one round."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.embed.base import Matrix
from engine.index.indexer import Indexer
from engine.memory import Memory
from engine.store.workspace import Workspace
from tests.engine.index.helpers import CALLER, EMBEDDER, Clock, GatedEmbedder


class Rounds(GatedEmbedder):
    """The real embedder, counting the texts of each document batch it is asked for (gate open)."""

    def __init__(self) -> None:
        super().__init__(EMBEDDER)
        self.gate.set()
        self.batches: list[int] = []

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        self.batches.append(len(texts))
        return super().embed_documents(texts)


def test_a_burst_of_writes_is_embedded_in_one_round(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    ws.open()
    embedder = Rounds()
    indexer = Indexer(ws, embedder, scan_interval_s=None, settle_s=5.0)
    indexer.start()
    try:
        assert indexer.wait_idle(60)
        memory = Memory(ws, clock=Clock())
        for i in range(5):  # well within the settle time: one wake-up, one round
            memory.remember(CALLER, f"burst {i}: the kelp host {i} runs the nightly reindex")
        assert indexer.wait_idle(60)
        assert len(embedder.batches) == 1 and embedder.batches[0] >= 5  # one round for all five
        assert indexer.backlog() == 0
    finally:
        indexer.stop()
        ws.close()
