"""Shared helpers for index and recall tests: a real engine (store + index + recall) on a temp dir."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.embed.base import Embedder, Matrix, ProviderName, ProviderStatus, Vector
from engine.embed.local import LocalEmbedder
from engine.index.db import IndexDB
from engine.index.indexer import Indexer
from engine.memory import Memory
from engine.recall.context import Recall
from engine.scope import Caller
from engine.store.workspace import Workspace

EMBEDDER = LocalEmbedder()  # the real model; loaded once per test process
CALLER = Caller(client_name="tests")


class Clock:
    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=30)
        return self.now


class GatedEmbedder:
    """The real embedder, but documents wait until ``gate`` opens (a slow background)."""

    def __init__(self, inner: Embedder = EMBEDDER) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.entered = threading.Event()  # set once a call is waiting at the gate
        self.waiting: list[str] = []  # the texts of the calls that reached the gate
        self.calls = 0

    @property
    def provider(self) -> ProviderName:
        return self.inner.provider

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        self.waiting.extend(texts)
        self.entered.set()
        if not self.gate.wait(30):
            raise TimeoutError("the test never opened the gate")
        self.calls += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        return self.inner.embed_query(text)

    def probe(self) -> ProviderStatus:
        return self.inner.probe()


@dataclass
class Engine:
    ws: Workspace
    memory: Memory
    indexer: Indexer
    recall: Recall
    clock: Clock

    def settle(self) -> None:
        assert self.indexer.wait_idle(60), "background indexing did not finish"


@contextmanager
def engine(root: Path, embedder: Embedder | None = None, *, settle: bool = True) -> Iterator[Engine]:
    ws = Workspace(root)
    ws.open()
    clock = Clock()
    indexer = Indexer(ws, embedder or EMBEDDER, scan_interval_s=None)
    indexer.start()
    try:
        e = Engine(ws, Memory(ws, clock=clock), indexer, Recall(indexer), clock)
        if settle:
            e.settle()
        yield e
    finally:
        indexer.stop()
        ws.close()


def flip_vector(db: IndexDB, rowid: int) -> None:
    """Store the opposite of chunk ``rowid``'s vector (inside the caller's ``db.transaction()``):
    a change every cosine shows, handed to the reader only once the transaction commits."""
    flipped = -db.reader.chunk_vectors([rowid])[rowid]
    db.db.execute("DELETE FROM vec_chunks WHERE rowid = ?", (rowid,))
    db.db.execute(
        "INSERT INTO vec_chunks (rowid, embedding) VALUES (?, ?)", (rowid, flipped.astype("<f4").tobytes())
    )
    db.touch("chunks", rowid)
