"""Group commit: concurrent writes share their fsyncs, none is acknowledged before it is durable,
readers see a write only once it is, and a write about the same thing decides after it."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.memory import Memory
from engine.results import Receipt
from engine.scope import Caller
from engine.store.commit import Staged

ME = Caller(client_name="test")


def _until(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)  # poll interval of a bounded wait


class HeldFlush:
    """Once armed, holds the first flush a leader starts (the engine's own hook), until released."""

    def __init__(self) -> None:
        self.armed = False
        self.holding = threading.Event()
        self.release = threading.Event()
        self.batches: list[int] = []

    def arm(self) -> None:
        self.armed = True

    def __call__(self, batch: list[Staged]) -> None:
        if not self.armed:
            return
        self.batches.append(len(batch))
        if len(self.batches) == 1:
            self.holding.set()
            assert self.release.wait(60)


@pytest.fixture
def held(memory: Memory) -> Iterator[HeldFlush]:
    hook = HeldFlush()
    memory.ws.commits.before_flush = hook
    yield hook
    hook.release.set()
    memory.ws.commits.before_flush = None


def _in_threads(actions: list[Callable[[], Receipt]]) -> tuple[list[threading.Thread], list[Receipt]]:
    receipts: list[Receipt] = []
    threads = [threading.Thread(target=lambda a=a: receipts.append(a())) for a in actions]
    for thread in threads:
        thread.start()
    return threads, receipts


@pytest.mark.req("store:durable", "perf:write")
def test_writes_that_arrive_together_share_one_fsync_and_wait_for_it(
    root: Path, memory: Memory, held: HeldFlush
) -> None:
    memory.remember(ME, "the ledger's first fact", "Fjord", "region", "eu")  # segment file exists
    held.arm()
    before = memory.ws.commits.stats.to_json()
    first, first_receipt = _in_threads(
        [lambda: memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")]
    )
    assert held.holding.wait(60)  # the first write's flush is under way, and held
    others, receipts = _in_threads(
        [
            functools.partial(memory.remember, ME, f"service {i} is up", f"svc{i}", "state", "up")
            for i in range(7)
        ]
    )
    _until(lambda: memory.ws.commits.waiting() == 7)  # all seven written, waiting for a flush
    # none is acknowledged, and no reader sees any, before the flush that covers it
    assert all(t.is_alive() for t in first + others) and not first_receipt and not receipts
    assert [f.subject for f in memory.retrieve(ME, predicate="state").facts] == []
    assert memory.retrieve(ME, subject="Fjord", predicate="database").facts == []
    held.release.set()
    for thread in first + others:
        thread.join(60)
    assert len(first_receipt) == 1 and len(receipts) == 7
    assert {r.action for r in [*first_receipt, *receipts]} == {"store"}
    after = memory.ws.commits.stats.to_json()
    assert held.batches == [1, 7]
    assert after["writes"] - before["writes"] == 8
    assert after["batches"] - before["batches"] == 2
    assert after["fsyncs"] - before["fsyncs"] == 2  # one ledger segment: one fsync per flush
    assert after["largest_batch"] == 7
    assert len(memory.retrieve(ME, predicate="state").facts) == 7
    text = (root / "facts" / "2026-03.md").read_text()
    assert all(f"svc{i}" in text for i in range(7))


@pytest.mark.req("store:durable", "perf:write")
def test_notes_written_together_fsync_their_folder_once(root: Path, memory: Memory, held: HeldFlush) -> None:
    memory.remember(ME, "the day's first note")  # the day's folder exists
    held.arm()
    before = memory.ws.commits.stats.to_json()
    first, _ = _in_threads([lambda: memory.remember(ME, "note zero")])
    assert held.holding.wait(60)
    others, receipts = _in_threads([functools.partial(memory.remember, ME, f"note {i}") for i in range(1, 6)])
    _until(lambda: memory.ws.commits.waiting() == 5)
    day = root / "notes" / "2026" / "03" / "14"
    assert len(list(day.glob("nte_*.md"))) == 1  # written, not yet in place: only temporary files
    assert len(list(day.glob(".nte_*.tmp"))) == 6
    held.release.set()
    for thread in first + others:
        thread.join(60)
    after = memory.ws.commits.stats.to_json()
    # each note's own bytes, then the folder once per flush: 1 + 1 and 5 + 1
    assert after["fsyncs"] - before["fsyncs"] == 8
    assert len(list(day.glob("nte_*.md"))) == 7 and not list(day.glob(".*"))
    assert all(memory.retrieve(ME, memory_id=r.id).notes for r in receipts)


@pytest.mark.req("store:durable")
def test_a_write_about_a_fact_being_saved_decides_after_it(memory: Memory, held: HeldFlush) -> None:
    held.arm()
    first, first_receipt = _in_threads(
        [lambda: memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")]
    )
    assert held.holding.wait(60)
    second, second_receipt = _in_threads(
        [lambda: memory.remember(ME, "Fjord uses Postgres", "fjord", "database", "Postgres")]
    )
    held.release.set()
    for thread in first + second:
        thread.join(60)
    assert first_receipt[0].action == "store"
    assert second_receipt[0].action == "nochange"  # it decided after the first was durable
    assert len(memory.retrieve(ME, subject="Fjord", include_history=True).facts) == 1


@pytest.mark.req("store:durable")
def test_the_write_lock_is_taken_only_once_registered_writes_are_durable(
    memory: Memory, held: HeldFlush
) -> None:
    """Every other writer (retire, the archive sweep, an import, a stop) takes the write lock, and
    finds every registered write durable and applied: it works on the store as before."""
    held.arm()
    first, receipt = _in_threads([lambda: memory.remember(ME, "a note to retire")])
    assert held.holding.wait(60)
    seen: list[int] = []
    taken = threading.Event()

    def other_writer() -> None:
        with memory.ws.lock:
            seen.append(len(memory.ws.notes))
            taken.set()

    other = threading.Thread(target=other_writer)
    other.start()
    assert not taken.wait(0.2) and seen == []  # it waits for the held flush
    held.release.set()
    other.join(60)
    first[0].join(60)
    assert seen == [1]
    assert memory.retire(ME, receipt[0].id).action == "retire"
