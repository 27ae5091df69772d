"""Group commit: concurrent writes share their fsyncs, each acknowledged only once durable.

A write still decides and writes its bytes under the workspace's write lock, one writer at a
time, but leaves its fsyncs (and a new note's rename into place) to a :class:`~engine.store.fsio.SyncPlan`
and registers it here (:meth:`GroupCommit.stage`); it then lets the lock go and waits
(:meth:`GroupCommit.wait`). One waiting writer leads: it takes every write registered so far and
makes them durable with one :func:`~engine.store.fsio.flush` (a ledger segment or day log that
several of them appended to is fsynced once, a directory once), while the next writes are
already being written. Then the batch is applied to the in-memory state, in the order it was
written, holding the write lock: by the leader if the lock is free, else by whoever holds it, as
it lets it go (:class:`RawLock`), so a leader never queues for the lock behind the next writers.
The batch's writers are then woken, and the batch handed to the index applier, a thread of its own
that updates the index for each write in the same order, holding no lock a writer needs: the next
writes are staged and flushed meanwhile. So:

- a write is acknowledged after the flush that covers it has returned, after the writes before it
  (flushes run one at a time, in order), and once the in-memory state has it — not waiting for
  its index update;
- readers see a write only once it is durable (its in-memory state changes after the flush);
- a read of the index first waits until the index has every write acknowledged before the read
  began (:meth:`GroupCommit.wait_indexed`; read-your-writes, whatever the connection); normally
  it already has;
- writes reach the index in the order they were written; an index update that raises is logged
  and left to the next reconcile, and the writes after it are indexed as usual;
- whoever takes :attr:`GroupCommit.lock` (every other writer: retire, restore, delete, the
  archive sweep, an import, a reload, a stop) first finishes every write registered, in memory and
  in the index (:meth:`GroupCommit.drain`), so it works on the store and the index as before;
- a write about something a registered write is about (the same fact, the same note text)
  waits for that one's in-memory state first (``drain(index=False)``), so its decision sees it.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from engine.errors import StoreUnavailable
from engine.store import fsio

log = logging.getLogger("almanac.engine.store")

#: How long the index applier's thread waits for more work before it ends (the next write starts
#: another): an idle workspace keeps no thread, a busy one no thread start per batch.
APPLIER_IDLE_S = 1.0


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
    """One registered write: what makes it durable, what to do once it is (``apply``: the
    in-memory state, under the write lock), and its index update (``index``, by the applier)."""

    keys: frozenset[Hashable]
    plan: fsio.SyncPlan
    apply: Callable[[], None]
    index: Callable[[], None] | None = None
    done: bool = False
    error: StoreUnavailable | None = None


class RawLock:
    """The write lock itself, re-entrant, without draining (:attr:`GroupCommit.raw`). Whoever
    lets it go last applies in memory the writes a flush made durable while it was held, before
    letting it go: a flush's leader never queues for the lock behind the next writers."""

    def __init__(self, commits: GroupCommit) -> None:
        self._lock = threading.RLock()
        self._depth = 0  # changed only by the thread that holds the lock
        self._commits = commits

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        return True

    def release(self) -> None:
        if self._depth > 1:
            self._depth -= 1
            self._lock.release()
        else:
            self._commits._letting_go()

    def _let_go(self) -> None:
        self._depth = 0
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


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
        self.raw = RawLock(self)
        self.lock = WriteLock(self)
        self.stats = CommitStats()
        #: Called by a leader before it flushes, with the writes it takes (a test holds a flush
        #: here to make writes pile up behind it; None in service).
        self.before_flush: Callable[[list[Staged]], None] | None = None
        #: Called by the index applier before it indexes, with the writes it takes (a test holds
        #: an index update here; None in service).
        self.before_index: Callable[[list[Staged]], None] | None = None
        mutex = threading.Lock()
        self._cv = threading.Condition(mutex)  # a flush or an apply finished: writers look
        self._indexed_cv = threading.Condition(mutex)  # the index caught up: reads and drains look
        self._work_cv = threading.Condition(mutex)  # writes to index arrived: the applier looks
        self._pending: list[Staged] = []  # registered, not yet taken by a flush
        self._flushing: list[Staged] = []  # taken by the flush under way
        self._durable: list[Staged] = []  # flushed, waiting to be applied (in order)
        self._to_index: collections.deque[Staged] = collections.deque()  # applied, not yet indexed
        self._applied = 0  # writes applied in memory (each may be acknowledged), ever
        self._indexed = 0  # of them, writes whose index update is over (done or failed), ever
        self._applying: threading.Thread | None = None
        self._applier: threading.Thread | None = None

    # -- writers (under ``raw``) ----------------------------------------------------------------

    def stage(
        self,
        keys: frozenset[Hashable],
        plan: fsio.SyncPlan,
        apply: Callable[[], None],
        index: Callable[[], None] | None = None,
    ) -> Staged:
        """Register a write whose bytes are written (call holding ``raw``); then :meth:`wait`."""
        staged = Staged(keys, plan, apply, index)
        with self._cv:
            self._pending.append(staged)
        return staged

    def pending(self, key: Hashable) -> bool:
        """Whether a registered write that is not applied in memory yet is about ``key``."""
        with self._cv:
            return any(key in s.keys for s in (*self._pending, *self._flushing, *self._durable))

    def waiting(self) -> int:
        """How many registered writes no flush has taken yet."""
        with self._cv:
            return len(self._pending)

    def wait(self, staged: Staged) -> None:
        """Return once ``staged`` is durable and applied in memory (call without the write lock);
        raise :class:`~engine.errors.StoreUnavailable` if its flush failed (nothing of it is applied)."""
        while True:
            with self._cv:
                if staged.done:
                    break
                if not self._pending or self._flushing:
                    self._cv.wait()
                    continue
                self._flush_locked()
                if not self._durable or not self.raw.acquire(blocking=False):
                    continue  # whoever holds the lock applies them as it lets it go (RawLock)
            self.raw.release()  # which applies them
        if staged.error is not None:
            raise staged.error

    # -- readers ---------------------------------------------------------------------------------

    def wait_indexed(self) -> None:
        """Return once every write applied so far (every write acknowledged before this call) is
        in the index, or its index update failed (call holding no lock of the store or the index)."""
        with self._cv:
            target = self._applied
            if self._indexed >= target or self._applier is threading.current_thread():
                return
            self._indexed_cv.wait_for(lambda: self._indexed >= target)

    def indexed(self) -> bool:
        """Whether every write applied in memory is in the index too."""
        with self._cv:
            return self._indexed >= self._applied

    # -- everyone else (under ``raw``) -----------------------------------------------------------

    def drain(self, *, index: bool = True) -> None:
        """Make every registered write durable and applied in memory, and (``index``) in the index
        too (call holding ``raw``)."""
        me = threading.current_thread()
        if self._applying is me:
            return  # a write being applied takes the lock again: nothing to finish
        index = index and self._applier is not me  # an index update that takes the lock again
        with self._cv:
            while True:
                if self._durable:
                    self._apply_locked()
                elif self._flushing:
                    self._cv.wait()
                elif self._pending:
                    self._flush_locked()
                elif index and self._indexed < self._applied:
                    self._indexed_cv.wait()
                else:
                    return

    # -- inside (under ``_cv``) --------------------------------------------------------------------

    def _letting_go(self) -> None:
        """The write lock's last release: apply what became durable meanwhile, then let it go (under
        ``_cv``, so that a leader that finds the lock taken can count on this)."""
        with self._cv:
            try:
                while self._durable:
                    self._apply_locked()
            finally:
                self.raw._let_go()

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
        """Apply the flushed writes in memory, in order, and hand them to the index applier (the
        caller holds ``raw`` too)."""
        batch, self._durable = self._durable, []
        if not batch:
            return
        self._cv.release()
        self._applying = threading.current_thread()
        try:
            for staged in batch:
                try:
                    staged.apply()
                except Exception:  # durable already: it is acknowledged; a start reads it
                    log.exception("applying a durable write in memory failed; a start reads it again")
        finally:
            self._applying = None
            self._cv.acquire()
        self._to_index.extend(batch)
        self._applied += len(batch)
        if self._applier is None:
            self._applier = threading.Thread(target=self._index_loop, name="almanac-index-apply", daemon=True)
            self._applier.start()
        else:
            self._work_cv.notify()
        for staged in batch:
            staged.done = True
        self._cv.notify_all()

    def _index_loop(self) -> None:
        """The index applier: index the applied writes in order; end after :data:`APPLIER_IDLE_S`
        without any."""
        with self._cv:
            while True:
                if not self._to_index and not self._work_cv.wait_for(lambda: self._to_index, APPLIER_IDLE_S):
                    self._applier = None
                    return
                batch = list(self._to_index)
                self._to_index.clear()
                self._cv.release()
                try:
                    self._index(batch)
                finally:
                    self._cv.acquire()
                    self._indexed += len(batch)
                    self._indexed_cv.notify_all()

    def _index(self, batch: list[Staged]) -> None:
        try:
            if self.before_index is not None:
                self.before_index(batch)
        except Exception:
            log.exception("the hook before an index update failed")
        for staged in batch:
            if staged.index is None:
                continue
            try:
                staged.index()
            except Exception:  # durable and acknowledged already: the index catches up
                log.exception("indexing a durable write failed; the next reconcile repairs the index")
