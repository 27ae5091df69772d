"""Reads on their own connections (engine/index/pool.py, engine/index/kept.py): a search answers
while another thread is inside a read, at most ``READERS`` connections are opened and all are
closed with the index, and a committed write is seen on every connection and through every kept
copy after its commit, never before.

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

            threading.Thread(target=search, daemon=True).start()
            assert answered.wait(30), "the search waited for another thread's read to end"
            assert note.id in [h.memory for h in found[0].hits]
        finally:
            go.set()
            inside.join(60)


@pytest.mark.req("rel:load", "perf:memory")
def test_reads_open_at_most_readers_connections_and_close_them_all(tmp_path: Path, holds: Holds) -> None:
    """Each thread inside a read holds a connection of its own; one more read waits for one of them
    to come back rather than opening another; closing the index closes every one."""
    with engine(tmp_path) as e:
        e.memory.remember(CALLER, "The orchard's pears ripen in September.")
        e.settle()
        reader = e.indexer.db.reader
        most = reader.connections.most
        assert most >= 2
        gos = [threading.Event() for _ in range(most + 1)]
        threads = [_held_read(holds, reader.counts, go) for go in gos[:most]]
        try:
            assert holds.wait_held(most)
            first = list(holds.held.values())
            assert len({id(c) for c in first}) == most  # one connection each
            threads.append(_held_read(holds, reader.counts, gos[most]))
            gos[0].set()  # one comes back: the waiting read is lent that one
            assert holds.wait_held(most + 1)
            assert len({id(c) for c in holds.held.values()}) == most
            assert reader.connections.opened == most
        finally:
            for go in gos:
                go.set()
            for thread in threads:
                thread.join(60)
    for connection in first:  # the engine's stop closed the index: every read connection too
        with pytest.raises(apsw.ConnectionClosedError):
            connection.execute("SELECT 1")


@pytest.mark.req("rel:load", "recall:fresh-facts", "recall:get-context")
def test_a_committed_write_is_seen_on_every_connection_and_not_before(tmp_path: Path) -> None:
    """Threads each reading on their own connection at once see a write's row, vector and words
    (the kept rows, vector matrix and term counts) only once it has committed, then all of them."""
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

        n = reader.connections.most
        steps = threading.Barrier(n + 1, timeout=60)
        views: dict[int, list[Any]] = {}

        def on_own_connection() -> None:
            with reader.reading() as connection:
                steps.wait()  # every thread holds its connection
                views[id(connection)] = [seen()]
                steps.wait()  # … the write commits …
                steps.wait()
                views[id(connection)].append(seen())

        threads = [threading.Thread(target=on_own_connection, daemon=True) for _ in range(n)]
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
        assert len(views) == n  # n connections, one per thread
        for earlier, later in views.values():
            assert earlier[0] is False and earlier[2] is False and earlier[3] == []
            assert earlier[1] == pytest.approx(before, abs=1e-3)
            assert later[0] is True and later[2] is True and later[3] == [rowid]
            assert later[1] == pytest.approx(-before, abs=1e-3)
