"""A whole engine in-process with the ageing machinery wired as the composition root wires it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from engine import settings
from engine.ageing.lifecycle import Lifecycle
from engine.embed.base import Embedder
from engine.embed.off import OffEmbedder
from engine.index.indexer import Indexer
from engine.memory import Memory
from engine.recall.context import Recall
from engine.scope import Caller
from engine.server import recall_settings
from engine.store.workspace import Workspace
from tests.engine.conftest import Clock

CALLER = Caller(client_name="tests")


@dataclass
class Aged:
    ws: Workspace
    memory: Memory
    recall: Recall
    ageing: Lifecycle
    indexer: Indexer
    clock: Clock

    def swept(self) -> None:
        assert self.ageing.sweeper.wait_idle(30), "the archive sweep did not finish"


@contextmanager
def aged_engine(
    root: Path,
    clock: Clock,
    layer: Mapping[str, object] | None = None,
    embedder: Embedder | None = None,
) -> Iterator[Aged]:
    loaded = settings.resolve(None, layer)
    ws = Workspace(root)
    ws.open()
    indexer = Indexer(ws, embedder or OffEmbedder(), scan_interval_s=None)
    indexer.start()
    ageing = Lifecycle(ws, loaded.settings, clock, fold_interval_s=None)
    ageing.start()
    try:
        memory = Memory(ws, clock, on_save=ageing.saved)
        recall = Recall(indexer, recall_settings(loaded.settings), ageing, loaded)
        aged = Aged(ws, memory, recall, ageing, indexer, clock)
        aged.swept()
        yield aged
    finally:
        ageing.stop()
        indexer.stop()
        ws.close()


def at(clock: Clock, moment: datetime) -> None:
    clock.set(moment)
