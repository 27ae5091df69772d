"""The threads a tool call's work runs on, handed over with one wake-up each way.

A call's work (a write that fsyncs, a search) runs off the event loop. The standard library's
``ThreadPoolExecutor`` hands it over through one queue that every idle thread waits on: a hand-off
wakes one of them, which in turn wakes the next waiting one to go back to sleep; and it spawns a
new thread whenever the last one has not quite marked itself idle yet, so calls one after another
alternate between two threads. Here each idle thread waits on its own lock, the most recently used
first: a hand-off wakes exactly the one thread it gives the work to (its caches still warm), and a
thread marks itself idle before it hands the result back, so calls one after another keep to one
thread. The result goes back with ``call_soon_threadsafe``, as the executor's does.

:meth:`ToolThreads.start` hands over work that returns nothing to wait for: it says itself what
happens next (``engine.surface.protocol`` writes a reply from the tool thread, then tells the loop),
once its thread is idle again — so a caller woken by that can already be handed the same thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

#: What a thread does when idle again (or None): the second half of a job.
After = Callable[[], None] | None
#: A job: its work, which returns what to do once the thread has marked itself idle.
_Job = Callable[[], After]


class _Worker:
    def __init__(self, job: _Job) -> None:
        self.job: _Job | None = job
        self.go = threading.Lock()
        self.go.acquire()  # released to hand this thread its next job


def _settle(future: asyncio.Future[T], result: T | None, error: BaseException | None) -> None:
    if future.cancelled():
        return  # the caller stopped waiting; the work ran to its end all the same
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


class ToolThreads:
    """At most ``limit`` daemon threads named ``name_N``; work beyond that waits its turn."""

    def __init__(self, limit: int, name: str) -> None:
        self.limit, self.name = limit, name
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []  # most recently idle last
        self._waiting: deque[_Job] = deque()
        self._threads: list[threading.Thread] = []
        self._busy: set[str] = set()

    def run(self, work: Callable[[], T]) -> asyncio.Future[T]:
        """``work()`` on one of the threads; the future (of the running loop) gets its outcome."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def job() -> After:
            result: Any = None
            error: BaseException | None = None
            try:
                result = work()
            except BaseException as exc:  # handed to the caller, as the executor does
                error = exc

            def settle() -> None:
                with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: no one is waiting
                    loop.call_soon_threadsafe(_settle, future, result, error)

            return settle

        self.start(job)
        return future

    def start(self, job: Callable[[], After]) -> None:
        """``job()`` on one of the threads, and then what it returned, once that thread is idle
        again. Nothing waits for it: ``job`` reports its own outcome (an exception it lets out
        is logged)."""
        with self._lock:
            if self._idle:
                worker = self._idle.pop()
                worker.job = job
                worker.go.release()
            elif len(self._threads) < self.limit:
                thread = threading.Thread(
                    target=self._serve,
                    args=(_Worker(job),),
                    name=f"{self.name}_{len(self._threads)}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
            else:
                self._waiting.append(job)

    def busy(self) -> list[str]:
        """The names of the threads running work now."""
        with self._lock:
            return sorted(self._busy)

    def _serve(self, worker: _Worker) -> None:
        me = threading.current_thread().name
        while True:
            job = worker.job
            assert job is not None
            with self._lock:
                self._busy.add(me)
            after: After = None
            try:
                after = job()
            except BaseException:
                log.exception("a tool thread's job failed")
            with self._lock:
                self._busy.discard(me)
                if self._waiting:
                    worker.job = self._waiting.popleft()
                    worker.go.release()
                else:
                    worker.job = None
                    self._idle.append(worker)  # before the result goes back: the next call finds us
            if after is not None:
                try:
                    after()
                except BaseException:
                    log.exception("a tool thread's job failed")
            del job, after
            worker.go.acquire()
