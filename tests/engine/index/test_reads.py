"""Reads from many threads at once (engine/index/reads.py): a committed write is seen by every
reading thread, through every kept copy, after its commit and never before; and whether a search
answers while another thread is inside a read, which the one read connection and its lock do not
allow yet (docs/perf-journal/2026-12-04-reader-pool.md: a pool of read connections was built and
measured no faster on this host, so it was not kept).

A thread is held inside a read by a progress handler that SQLite calls while a statement runs,
installed on every connection opened during the test (``apsw.connection_hooks``): the thread
stops in the middle of its statement, on its connection, until the test lets it go."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from engine.index.schema import CHUNK_WEIGHTS
from tests.engine.index.helpers import CALLER, engine


class Holds:
    """Holds a thread that asked for it (:meth:`arm`) inside its next SQLite statement."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.armed: dict[int, threading.Event] = {}  # thread id → what lets it go
        self.held: dict[int, Any] = {}  # thread id → the connection it is held on

    def hook(self, connection: Any) -> None:
        """Called by apsw for every connection opened."""

        def progress() -> bool:
            me = threading.get_ident()
            go = self.armed.get(me)
            if go is not None and me not in self.held:
                with self.changed:
                    self.held[me] = connection
                    self.changed.notify_all()
                go.wait(60)
            return False  # never abort the statement

        connection.set_progress_handler(progress, 1)

    def arm(self, go: threading.Event) -> None:
        """Hold this thread in its next statement until ``go`` is set."""
        self.armed[threading.get_ident()] = go

    def wait_held(self, n: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self.held) >= n, timeout=60)


@pytest.fixture
def holds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Holds]:
    found = Holds()
    monkeypatch.setattr(apsw, "connection_hooks", [*apsw.connection_hooks, found.hook])
    yield found


def _held_read(holds: Holds, read: Any, go: threading.Event) -> threading.Thread:
    def run() -> None:
        holds.arm(go)
        read()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.req("rel:load", "perf:context-small")
@pytest.mark.xfail(
    strict=True,
    reason="reads share one connection and its lock (docs/perf-journal/2026-12-04-reader-pool.md)",
)
def test_a_search_answers_while_another_thread_is_inside_a_read(tmp_path: Path, holds: Holds) -> None:
    with engine(tmp_path) as e:
        note = e.memory.remember(CALLER, "The lighthouse keeper logs the fog horn at dawn.")
        e.memory.remember(CALLER, "The ferry timetable changes in October.")
        e.settle()
        go = threading.Event()
        inside = _held_read(holds, e.indexer.db.reader.counts, go)
        try:
            assert holds.wait_held(1), "the read never reached SQLite"
            answered = threading.Event()
            found: list[Any] = []

            def search() -> None:
                found.append(e.recall.search("lighthouse fog horn", limit=5))
                answered.set()

            searching = threading.Thread(target=search, daemon=True)
            searching.start()
            assert answered.wait(10), "the search waited for another thread's read to end"
            assert note.id in [h.memory for h in found[0].hits]
        finally:
            go.set()
            inside.join(60)
            searching.join(60)  # before the engine closes


@pytest.mark.req("rel:load", "recall:fresh-facts", "recall:get-context")
def test_a_committed_write_is_seen_by_every_reading_thread_and_not_before(tmp_path: Path) -> None:
    """Threads reading at once see a write's row, vector and words (the kept rows, vector matrix,
    term counts and name lookups) only once it has committed, then all of them."""
    with engine(tmp_path) as e:
        note = e.memory.remember(CALLER, "Harbour cranes unload the containers at night.")
        e.memory.remember(CALLER, "The harbour master walks the pier at noon.")
        e.settle()
        db, reader = e.indexer.db, e.indexer.db.reader
        (rowid,) = [r for (r,) in db.db.execute("SELECT id FROM chunks WHERE memory = ?", (note.id,))]
        query = e.indexer.embedder.embed_query("harbour cranes")
        before = reader.cosines("chunks", query, [rowid])[rowid]  # the kept copies, filled
        assert reader.keyword("chunks", ["zyzzyva"], CHUNK_WEIGHTS, 10, 8000)[0] == []

        def seen() -> tuple[bool, float, bool, list[int]]:
            row = reader.chunk_rows([rowid])[rowid]
            found, _ = reader.keyword("chunks", ["zyzzyva"], CHUNK_WEIGHTS, 10, 8000)
            return (
                "zyzzyva" in row.text,
                reader.cosines("chunks", query, [rowid])[rowid],
                reader.exists("chunks", '"zyzzyva"'),
                [r for r, _ in found],
            )

        n = 4
        steps = threading.Barrier(n + 1, timeout=60)
        views: dict[int, list[Any]] = {}

        def reading(k: int) -> None:
            steps.wait()  # every thread starts reading at once
            views[k] = [seen()]
            steps.wait()  # … the write commits …
            steps.wait()
            views[k].append(seen())

        threads = [threading.Thread(target=reading, args=(k,), daemon=True) for k in range(n)]
        with db.transaction():
            db.db.execute("UPDATE chunks SET text = text || ' zyzzyva' WHERE id = ?", (rowid,))
            flipped = -reader.chunk_vectors([rowid])[rowid]
            db.db.execute("DELETE FROM vec_chunks WHERE rowid = ?", (rowid,))
            db.db.execute(
                "INSERT INTO vec_chunks (rowid, embedding) VALUES (?, ?)",
                (rowid, flipped.astype("<f4").tobytes()),
            )
            db.touch("chunks", rowid)
            for thread in threads:
                thread.start()
            steps.wait()
            steps.wait()  # every thread has read once, the write still open
        steps.wait()  # committed
        for thread in threads:
            thread.join(60)
        assert len(views) == n
        for earlier, later in views.values():
            assert earlier[0] is False and earlier[2] is False and earlier[3] == []
            assert earlier[1] == pytest.approx(before, abs=1e-3)
            assert later[0] is True and later[2] is True and later[3] == [rowid]
            assert later[1] == pytest.approx(-before, abs=1e-3)
