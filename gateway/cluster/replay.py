"""The nonces of the signed calls a node has accepted, so that none is accepted twice
(``run:scale-out``; deploy/SCALING.md "Between nodes").

Every signed call between nodes carries a random nonce inside its signed material
(:mod:`gateway.cluster.signing`), and its timestamp is good for ``window`` seconds either side of
the receiver's clock. A node remembers each nonce it accepted until its call's timestamp has left
the window (``timestamp + window``): a captured call sent again within the window is refused; after
it, the timestamp refuses it. Nothing else is kept.

The cache is bounded (``max_entries``). Should more calls arrive within one window than it holds,
the nonce closest to its expiry is dropped, and from then on every call signed at or before that
nonce's timestamp is refused (``floor``) — so forgetting a nonce never lets its call through again;
it only refuses, for at most one window, calls as old as the ones forgotten. One lock guards it: the
checks are made on the event loop and in worker threads alike.
"""

from __future__ import annotations

import heapq
import math
import threading

#: How many nonces a node remembers at most (about 190 bytes each, its nonce included: about 11.5 MB
#: when full). A nonce is kept until its call's timestamp is ``window`` (30 s) old: that is 2,000
#: signed calls a second, sustained, before a call is refused for being as old as one forgotten.
MAX_ENTRIES = 60_000


class Replayed(Exception):
    """This nonce was accepted before, or cannot be told apart from one that was (the message says
    which)."""


class ReplayCache:
    def __init__(self, window: float, max_entries: int = MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("a replay cache holds at least one nonce")
        self.window, self.max_entries = window, max_entries
        self._expires: dict[str, float] = {}  # nonce -> when its call's timestamp leaves the window
        self._heap: list[tuple[float, str]] = []  # (expiry, nonce), soonest first
        self.floor = -math.inf  # calls signed at or before this timestamp are refused
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._expires)

    def admit(self, nonce: str, timestamp: float, now: float) -> None:
        """Remember ``nonce`` (of a call signed at ``timestamp``, its signature already checked), or
        raise :class:`Replayed` if it was accepted before within the window."""
        with self._lock:
            self._expire(now)
            if nonce in self._expires:
                raise Replayed(
                    "this signed call was already received (its nonce was seen within the signature's "
                    f"{self.window:g} s window): a replay is refused; sign each call anew"
                )
            if timestamp <= self.floor:
                raise Replayed(
                    "this node received more signed calls within the signature's window than it can "
                    "remember, and this one is as old as one it forgot; sign the call anew"
                )
            while len(self._expires) >= self.max_entries:
                expiry, dropped = heapq.heappop(self._heap)
                del self._expires[dropped]
                self.floor = max(self.floor, expiry - self.window)
            expiry = timestamp + self.window
            self._expires[nonce] = expiry
            heapq.heappush(self._heap, (expiry, nonce))

    def _expire(self, now: float) -> None:
        while self._heap and self._heap[0][0] < now:
            _, nonce = heapq.heappop(self._heap)
            del self._expires[nonce]
