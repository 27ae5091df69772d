"""Engine starts, queued (``gw:spawn``, ``gw:503``): at most ``concurrency`` at once, first come first
served, and how long a caller should wait before trying again (``Retry-After``), from the measured rate.

A start is CPU-bound (imports, opening the index): on a small host, thirty at once each take thirty
times longer and all miss the caller's deadline together. Queued, the first few finish quickly and
the rest follow at the host's pace. A caller whose wait ends is told when to come back: the queue
knows how many starts are ahead of its own and how long a start has taken lately.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

#: Starts whose durations make up the measured start time.
MEASURED_STARTS = 16
#: The longest ``Retry-After`` given for a start still to come (seconds).
RETRY_AFTER_MAX = 120.0


def default_concurrency() -> int:
    """Starts at once when the operator sets none: one per core this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, cores)


def retry_after(*, ahead: int | None, elapsed: float, start_seconds: float, concurrency: int) -> float:
    """Seconds until a start is likely done, at least 1 and at most :data:`RETRY_AFTER_MAX`.

    ``ahead`` is how many queued starts come before this one (None: its own start is under way,
    for ``elapsed`` seconds). A queued start waits for its turn — ``(ahead + 1) × start_seconds /
    concurrency`` — and then takes ``start_seconds`` itself."""
    if ahead is None:
        left = start_seconds - elapsed
    else:
        left = (ahead + 1) * start_seconds / concurrency + start_seconds
    return min(RETRY_AFTER_MAX, max(1.0, left))


class StartQueue:
    """A fair gate for engine starts, keyed by workspace id, with the recent start times."""

    def __init__(
        self, concurrency: int, *, prior: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self._prior = prior
        self._clock = clock
        self._waiting: list[str] = []
        self._active: dict[str, float] = {}
        self._durations: deque[float] = deque(maxlen=MEASURED_STARTS)
        self._changed = anyio.Event()

    @property
    def depth(self) -> int:
        """Starts waiting for their turn."""
        return len(self._waiting)

    @property
    def starting(self) -> int:
        """Starts under way."""
        return len(self._active)

    @property
    def start_seconds(self) -> float:
        """The mean of the recent start times (spawn to healthy); ``prior`` until one is measured."""
        return sum(self._durations) / len(self._durations) if self._durations else self._prior

    def record_start(self, seconds: float) -> None:
        """Count one more start that took ``seconds`` (spawn to healthy)."""
        self._durations.append(seconds)

    def retry_after(self, key: str) -> float | None:
        """When ``key``'s caller should come back; None when ``key`` is neither queued nor starting."""
        if key in self._active:
            elapsed = self._clock() - self._active[key]
            return retry_after(
                ahead=None, elapsed=elapsed, start_seconds=self.start_seconds, concurrency=self.concurrency
            )
        if key in self._waiting:
            return retry_after(
                ahead=self._waiting.index(key),
                elapsed=0.0,
                start_seconds=self.start_seconds,
                concurrency=self.concurrency,
            )
        return None

    def ahead_of(self, key: str) -> int | None:
        """How many queued starts come before ``key`` (None: it is not queued)."""
        return self._waiting.index(key) if key in self._waiting else None

    def enqueue(self, key: str) -> None:
        """Join the back of the queue (at once, so the caller's ``Retry-After`` already counts it)."""
        if key in self._waiting or key in self._active:
            raise RuntimeError(f"{key} is already queued or starting")
        self._waiting.append(key)
        self._notify()

    def withdraw(self, key: str) -> None:
        """Leave the queue without a turn (a start called off before it began); no-op otherwise."""
        if key in self._waiting:
            self._waiting.remove(key)
            self._notify()

    @asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        """Wait for ``key``'s turn (it must be queued), then hold one of the places while starting."""
        if key not in self._waiting:
            raise RuntimeError(f"{key} is not queued")
        try:
            while not (self._waiting[0] == key and len(self._active) < self.concurrency):
                await self._changed.wait()
        except BaseException:
            self.withdraw(key)
            raise
        self._waiting.pop(0)
        self._active[key] = self._clock()
        self._notify()
        try:
            yield
        finally:
            del self._active[key]
            self._notify()

    async def idle(self) -> None:
        """Return once no start is queued or under way."""
        while self._waiting or self._active:
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
