"""Group commit: concurrent writes share their fsyncs, none is acknowledged before it is durable,
readers see a write only once it is, and a write about the same thing decides after it; the index
is updated after the acknowledgement, in order, and a read after it waits to find the write."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.embed.off import OffEmbedder
from engine.memory import Memory
from engine.recall.query import quote
from engine.results import Receipt
from engine.scope import Caller
from engine.store import ids, ledger
from engine.store.commit import Staged
from tests.engine.index.helpers import CALLER, Engine, engine

ME = Caller(client_name="test")


def _until(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)  # poll interval of a bounded wait


class Held:
    """Once armed, holds the first batch the hook it is set as sees (a flush's, or the index
    applier's: the engine's own hooks), until released."""

    def __init__(self, *, armed: bool = False) -> None:
        self.armed = armed
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
def held(memory: Memory) -> Iterator[Held]:
    hook = Held()
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
    root: Path, memory: Memory, held: Held
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
def test_notes_written_together_fsync_their_folder_once(root: Path, memory: Memory, held: Held) -> None:
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
def test_a_write_about_a_fact_being_saved_decides_after_it(memory: Memory, held: Held) -> None:
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
def test_the_write_lock_is_taken_only_once_registered_writes_are_durable(memory: Memory, held: Held) -> None:
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


@pytest.mark.req("store:durable", "perf:write")
def test_a_batch_flushed_while_the_lock_is_held_is_applied_as_the_holder_lets_go(
    memory: Memory, held: Held
) -> None:
    """A leader does not queue for the write lock behind the next writers: the holder applies."""
    held.arm()
    writer, receipts = _in_threads(
        [lambda: memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")]
    )
    assert held.holding.wait(60)
    batches = memory.ws.commits.stats.batches
    memory.ws.staging.acquire()  # the next writer, deciding
    try:
        held.release.set()
        _until(lambda: memory.ws.commits.stats.batches == batches + 1)  # durable, not applied
        assert memory.retrieve(ME, subject="Fjord", predicate="database").facts == []
        assert not receipts
    finally:
        memory.ws.staging.release()
    # applied by this thread as it let the lock go, before the leader was even woken
    assert [f.object for f in memory.retrieve(ME, subject="Fjord", predicate="database").facts] == [
        "Postgres"
    ]
    writer[0].join(60)
    assert receipts[0].action == "store"


# -- the index update, off the write's critical path ----------------------------------------------


@pytest.fixture
def indexed(root: Path) -> Iterator[Engine]:
    with engine(root, OffEmbedder()) as e:
        yield e


@pytest.fixture
def held_index(indexed: Engine) -> Iterator[Held]:
    hook = Held(armed=True)
    indexed.ws.commits.before_index = hook
    yield hook
    hook.release.set()
    indexed.ws.commits.before_index = None


def _finds(e: Engine, word: str) -> bool:
    """Whether the index's rows have ``word`` (read straight from the reader: no waiting)."""
    return e.indexer.db.reader.exists("chunks", quote(word)) or e.indexer.db.reader.exists(
        "facts", quote(word)
    )


def _found_ids(reply: dict[str, Any]) -> set[str]:
    return {item["id"] for item in (*reply["facts"], *reply["notes"])}


@pytest.mark.req("store:durable", "perf:write", "recall:fresh-facts")
def test_a_write_is_acknowledged_before_its_index_update_and_a_read_after_it_waits_to_find_it(
    indexed: Engine, held_index: Held
) -> None:
    writer, receipts = _in_threads(
        [lambda: indexed.memory.remember(CALLER, "the heron nests by the mill pond")]
    )
    assert held_index.holding.wait(60)  # its index update has begun, and is held
    writer[0].join(60)
    assert len(receipts) == 1  # acknowledged: durable, in memory, not yet in the index
    assert indexed.memory.retrieve(CALLER, memory_id=receipts[0].id).notes
    assert not _finds(indexed, "heron")
    replies: list[dict[str, Any]] = []
    read_done = threading.Event()

    def read() -> None:
        replies.append(indexed.recall.get_context(CALLER, "heron mill pond"))
        read_done.set()

    reader = threading.Thread(target=read)
    reader.start()  # it began after the acknowledgement: it must find the write
    assert not read_done.wait(0.3)  # it waits for the index update (bounded look)
    held_index.release.set()
    reader.join(60)
    assert receipts[0].id in _found_ids(replies[0])
    assert _finds(indexed, "heron")


@pytest.mark.req("perf:write", "rel:load")
def test_the_next_write_is_staged_and_flushed_while_an_index_update_is_held(
    indexed: Engine, held_index: Held
) -> None:
    before = indexed.ws.commits.stats.to_json()
    first, _ = _in_threads([lambda: indexed.memory.remember(CALLER, "the first heron")])
    assert held_index.holding.wait(60)
    first[0].join(60)
    later, receipts = _in_threads(
        [
            lambda: indexed.memory.remember(CALLER, "a kingfisher on the weir"),
            lambda: indexed.memory.remember(CALLER, "Mill pond", "mill pond", "depth", "3 m"),
            lambda: indexed.memory.remember_note(CALLER, "walked round the pond at dawn"),
        ]
    )
    for thread in later:
        thread.join(60)
    assert len(receipts) == 3 and all(not t.is_alive() for t in later)  # all acknowledged
    after = indexed.ws.commits.stats.to_json()
    assert after["writes"] - before["writes"] == 4
    assert not indexed.ws.commits.indexed() and not _finds(indexed, "kingfisher")
    held_index.release.set()
    indexed.indexer.settled()
    assert all(_finds(indexed, word) for word in ("heron", "kingfisher", "depth", "dawn"))


def _ledger_order(root: Path) -> list[str]:
    """The facts' ids in the order their events are in the ledger (the order they were written)."""
    segments = sorted((root / "facts").glob("*.md"))
    return [e.memory for p in segments for e in ledger.parse_ledger(p.read_text(encoding="utf-8")).events]


@pytest.mark.req("rel:concurrency", "store:durable")
def test_writes_reach_the_index_in_the_order_they_were_written(root: Path, indexed: Engine) -> None:
    seen: list[str] = []
    indexed.ws.listeners.append(seen.append)  # called after the indexer's, by the same applier
    values = {f"writer {w}": [f"value {w}.{i}" for i in range(12)] for w in range(6)}

    def write(writer: str) -> None:
        for value in values[writer]:  # one fact each writer supersedes, and one fact of its own
            indexed.memory.remember(CALLER, f"the shared gauge reads {value}", "gauge", "reading", value)
            indexed.memory.remember(CALLER, f"{writer} saw {value}", writer, "saw", value)

    threads = [threading.Thread(target=write, args=(w,)) for w in values]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    indexed.indexer.settled()
    assert seen == _ledger_order(root)  # every write indexed once, in the order it was written
    gauge = next(r for r in indexed.ws.facts.records.values() if r.subject_key == "gauge")
    rows = {row.memory: row for row in indexed.indexer.db.reader.fact_rows().values()}
    assert len(rows) == 7  # the gauge and each writer's own fact
    assert rows[gauge.fact_id].object == gauge.values[-1].object  # the last value written wins


@pytest.mark.req("store:durable", "rel:concurrency")
def test_the_write_lock_is_taken_only_once_the_index_has_every_registered_write(
    indexed: Engine, held_index: Held
) -> None:
    """Whoever takes the write lock (retire, restore, delete, the archive sweep, an import, a
    reload, a stop) finds the index fully applied, as before."""
    first, receipts = _in_threads([lambda: indexed.memory.remember(CALLER, "a note about otters")])
    assert held_index.holding.wait(60)
    first[0].join(60)
    seen: list[bool] = []
    taken = threading.Event()

    def other_writer() -> None:
        with indexed.ws.lock:
            seen.append(_finds(indexed, "otters"))
            taken.set()

    other = threading.Thread(target=other_writer)
    other.start()
    assert not taken.wait(0.3) and seen == []  # it waits for the held index update
    held_index.release.set()
    other.join(60)
    assert seen == [True]
    assert indexed.memory.retire(CALLER, receipts[0].id).action == "retire"


@pytest.mark.req("store:durable", "store:hand-edits")
def test_an_index_update_that_fails_is_logged_and_the_next_scan_repairs_it(
    indexed: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    def fail_notes(memory: str) -> None:
        if ids.kind_of(memory) == "note":
            raise RuntimeError("the index update failed")

    indexed.ws.listeners.insert(0, fail_notes)  # runs before the indexer's, and stops it
    with caplog.at_level(logging.ERROR, logger="almanac.engine.store"):
        receipt = indexed.memory.remember(CALLER, "a lapwing over the water meadow")
        logged = indexed.memory.remember_note(CALLER, "a curlew calling")  # the next write
        indexed.indexer.settled()
    assert receipt.action == "store"  # acknowledged all the same: it is durable
    assert "indexing a durable write failed" in caplog.text
    assert not _finds(indexed, "lapwing")
    assert _finds(indexed, "curlew") and logged.action == "store"  # the writes after it are indexed
    indexed.ws.listeners.remove(fail_notes)
    assert indexed.indexer.scan_once()  # the note's file is not what the index last saw: reconciled
    assert receipt.id in _found_ids(indexed.recall.get_context(CALLER, "lapwing water meadow"))
