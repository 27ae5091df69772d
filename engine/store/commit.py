"""Group commit: concurrent writes share their fsyncs, each acknowledged only once durable.

A write still decides and writes its bytes under the workspace's write lock, one writer at a
time, but leaves its fsyncs (and a new note's rename into place) to a :class:`~engine.store.fsio.SyncPlan`
and registers it here (:meth:`GroupCommit.stage`); it then lets the lock go and waits
(:meth:`GroupCommit.wait`). One waiting writer leads: it takes every write registered so far and
makes them durable with one :func:`~engine.store.fsio.flush` (a ledger segment or day log that
several of them appended to is fsynced once, a directory once), while the next writes are
already being written; then, holding the write lock, it applies them to the in-memory state and
the index, in the order they were written, and wakes their writers. So:

- a write is acknowledged after the flush that covers it has returned, and after the writes
  before it (flushes run one at a time, in order);
- readers see a write only once it is durable (its in-memory state changes after the flush);
- whoever takes :attr:`GroupCommit.lock` (every other writer: retire, restore, delete, the
  archive sweep, an import, a reload, a stop) first finishes every write registered
  (:meth:`GroupCommit.drain`), so it works on the store exactly as before;
- a write about something a registered write is about (the same fact, the same note text)
  drains first, so its decision sees the earlier one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from engine.errors import StoreUnavailable
from engine.store import fsio

log = logging.getLogger("almanac.engine.store")


@dataclass
class CommitStats:
    """Counters for the metrics (``perf:write``): writes made durable by group commits, the
    flushes that did it, and their fsyncs."""

    writes: int = 0
    batches: int = 0
    fsyncs: int = 0
    largest_batch: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "writes": self.writes,
            "batches": self.batches,
            "fsyncs": self.fsyncs,
            "largest_batch": self.largest_batch,
        }


@dataclass(eq=False)
class Staged:
    """One registered write: what makes it durable, and what to do once it is."""

    keys: frozenset[Hashable]
    plan: fsio.SyncPlan
    apply: Callable[[], None]
    done: bool = False
    error: StoreUnavailable | None = None


class WriteLock:
    """The workspace's write lock: taking it finishes every registered write first (see the
    module's docstring). ``raw`` is the lock itself, for the group commit's own writers."""

    def __init__(self, commits: GroupCommit) -> None:
        self.raw = commits.raw
        self._commits = commits

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self.raw.acquire(blocking, timeout):
            return False
        try:
            self._commits.drain()
        except BaseException:
            self.raw.release()
            raise
        return True

    def release(self) -> None:
        self.raw.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class GroupCommit:
    def __init__(self) -> None:
        self.raw = threading.RLock()
        self.lock = WriteLock(self)
        self.stats = CommitStats()
        #: Called by a leader before it flushes, with the writes it takes (a test holds a flush
        #: here to make writes pile up behind it; None in service).
        self.before_flush: Callable[[list[Staged]], None] | None = None
        self._cv = threading.Condition(threading.Lock())
        self._pending: list[Staged] = []  # registered, not yet taken by a flush
        self._flushing: list[Staged] = []  # taken by the flush under way
        self._durable: list[Staged] = []  # flushed, waiting to be applied (in order)
        self._applying: threading.Thread | None = None

    # -- writers (under ``raw``) ----------------------------------------------------------------

    def stage(self, keys: frozenset[Hashable], plan: fsio.SyncPlan, apply: Callable[[], None]) -> Staged:
        """Register a write whose bytes are written (call holding ``raw``); then :meth:`wait`."""
        staged = Staged(keys, plan, apply)
        with self._cv:
            self._pending.append(staged)
        return staged

    def pending(self, key: Hashable) -> bool:
        """Whether a registered write that is not applied yet is about ``key``."""
        with self._cv:
            return any(key in s.keys for s in (*self._pending, *self._flushing, *self._durable))

    def waiting(self) -> int:
        """How many registered writes no flush has taken yet."""
        with self._cv:
            return len(self._pending)

    def wait(self, staged: Staged) -> None:
        """Return once ``staged`` is durable and applied (call without the write lock); raise
        :class:`~engine.errors.StoreUnavailable` if its flush failed (nothing of it is applied)."""
        while True:
            with self._cv:
                if staged.done:
                    break
                if not self._pending or self._flushing:
                    self._cv.wait()
                    continue
                self._flush_locked()
            with self.raw, self._cv:
                self._apply_locked()
        if staged.error is not None:
            raise staged.error

    # -- everyone else (under ``raw``) -----------------------------------------------------------

    def drain(self) -> None:
        """Make every registered write durable and applied (call holding ``raw``)."""
        if self._applying is threading.current_thread():
            return  # a listener of a write being applied takes the lock again: nothing to finish
        with self._cv:
            while self._pending or self._flushing or self._durable:
                if self._durable:
                    self._apply_locked()
                elif self._flushing:
                    self._cv.wait()
                else:
                    self._flush_locked()

    # -- inside (under ``_cv``) --------------------------------------------------------------------

    def _flush_locked(self) -> None:
        batch, self._pending = self._pending, []
        self._flushing = batch
        self._cv.release()
        error: StoreUnavailable | None = None
        fsyncs = 0
        try:
            if self.before_flush is not None:
                self.before_flush(batch)
            fsyncs = fsio.flush(s.plan for s in batch)
        except Exception as exc:
            fsio.discard(s.plan for s in batch)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            error = StoreUnavailable(
                f"could not write durably ({why}); nothing was saved. "
                "Check the workspace directory's disk space and permissions, then try again."
            )
            log.error("a group commit of %d write(s) failed: %s", len(batch), exc)
        finally:
            self._cv.acquire()
            self._flushing = []
        if error is None:
            self._durable.extend(batch)
            self.stats.writes += len(batch)
            self.stats.batches += 1
            self.stats.fsyncs += fsyncs
            self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        else:
            for staged in batch:
                staged.error, staged.done = error, True
        self._cv.notify_all()

    def _apply_locked(self) -> None:
        """Apply the flushed writes, in order (the caller holds ``raw`` too)."""
        batch, self._durable = self._durable, []
        if not batch:
            return
        self._cv.release()
        self._applying = threading.current_thread()
        try:
            for staged in batch:
                try:
                    staged.apply()
                except Exception:  # durable already: it is acknowledged; the index catches up
                    log.exception("applying a durable write failed; the next reconcile repairs the index")
        finally:
            self._applying = None
            self._cv.acquire()
        for staged in batch:
            staged.done = True
        self._cv.notify_all()
