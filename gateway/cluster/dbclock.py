"""The one clock a cluster's nodes judge each other by: the database's (``run:scale-out``;
deploy/SCALING.md "One clock: the database's").

A node's wall clock may be off by any amount (no NTP, a paused VM, a wrong time zone setting), and
two nodes' clocks never agree exactly. So nothing a node writes for the others to judge — its
heartbeat, its leases, a move's deadline, a signed call's timestamp — and nothing it judges of them
— is this node live, has this lease run out, may this move be called off, is this signature fresh —
uses a node's own wall clock. Every such time is the control plane's: PostgreSQL's
``clock_timestamp()`` (for the SQLite control plane, a file on one host, that host's clock is the
database's).

:class:`DatabaseClock` reads it (:meth:`sync`, a round trip: a node at start and at every heartbeat,
a command at its start) and counts on from the reading on this process's monotonic clock, which no
one can set; a reading is taken as the database's time at the midpoint of its round trip, so it is
off by at most half of it. Between readings, and while the database cannot be reached, it keeps
counting: a lease this node holds still runs out on time.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class DatabaseClock:
    def __init__(self, read: Callable[[], float], *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._read, self._monotonic = read, monotonic
        self._base: tuple[float, float] | None = None  # (database time, monotonic time) of a reading

    def sync(self) -> None:
        """Read the database's clock (blocking: call it off the event loop). Raises what the
        control plane raises when it cannot be reached; the last reading is kept then."""
        before = self._monotonic()
        read = self._read()
        after = self._monotonic()
        self._base = (read, (before + after) / 2)

    @property
    def synced(self) -> bool:
        return self._base is not None

    def now(self) -> float:
        """The database's time now (epoch seconds). A clock never synced reads the database first."""
        if self._base is None:
            self.sync()
        assert self._base is not None
        read, at = self._base
        return read + (self._monotonic() - at)


def database_clock(read: Callable[[], float]) -> DatabaseClock:
    """A :class:`DatabaseClock` already synced (a command's, once at its start)."""
    clock = DatabaseClock(read)
    clock.sync()
    return clock
