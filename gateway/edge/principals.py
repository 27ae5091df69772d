"""Who a bearer token speaks for, without a database call on the event loop per request (``perf:gateway``).

The control plane is a database (a file or a server); a query there blocks. The gateway's
request path therefore asks it from a worker thread (:func:`~gateway.asgi.off_loop`), and remembers
each answer for a moment (:class:`PrincipalCache`):

- a principal is reused for at most ``ttl`` seconds (default :data:`TTL_S`, half a second), so a
  token revoked anywhere — on a page of this gateway, by the CLI, on another gateway sharing the
  control plane — is refused within ``ttl`` plus one lookup, well inside the one second the spec
  allows;
- a state-changing request handled by this gateway outside the memory traffic (a revoke, a
  sign-out, an OAuth ``/token`` or ``/revoke``) empties the cache before its answer goes out
  (:class:`ForgetAfterChanges`), so what is changed here takes effect at once;
- an unknown, expired or revoked token is never remembered: it is looked up every time (and
  audited), so nothing a stranger sends grows the cache;
- the wall clock decides freshness (the same clock that decides expiry), so an entry is never
  used after the clock moved past its ``ttl``, nor when the clock went back;
- while the control plane cannot be reached (``ControlPlaneUnavailable``), a principal looked up
  within the last ``stale_ttl`` seconds (default :data:`STALE_S`) is still accepted — no revocation
  can be made meanwhile, the control plane being where revocations are written — and any other token
  is refused with 503 ``control_plane_unavailable`` and ``Retry-After``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.asgi import off_loop
from gateway.control import tokens
from gateway.control.records import Principal
from gateway.errors import ControlPlaneUnavailable

#: How long a looked-up principal is reused (seconds). Revocation is honoured within this.
TTL_S = 0.5
#: While the control plane is unreachable, a principal looked up this recently is still accepted (seconds).
STALE_S = 30.0
#: At most this many principals are remembered (the least recently fetched are dropped).
MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class _Entry:
    principal: Principal
    fetched: float  # wall clock, epoch seconds


Lookup = Callable[[str, float], Principal | None]


class PrincipalCache:
    """Principals by token hash, each for at most ``ttl`` seconds; misses are looked up off the loop.

    ``lookup(secret, now)`` is the control plane's query (it decides expiry at ``now``)."""

    def __init__(
        self,
        lookup: Lookup,
        *,
        ttl: float = TTL_S,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.time,
        stale_ttl: float = STALE_S,
    ) -> None:
        self.lookup, self.ttl, self.max_entries, self.clock = lookup, ttl, max_entries, clock
        self.stale_ttl = stale_ttl
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._generation = 0  # moved on by forget(): a lookup begun before it is not kept
        self.hits = 0
        self.misses = 0

    async def principal(self, secret: str) -> Principal | None:
        """The principal ``secret`` speaks for now, or None (unknown, expired, revoked)."""
        key = tokens.hash_token(secret)
        now = self.clock()
        entry = self._entries.get(key)
        if entry is not None and 0.0 <= now - entry.fetched < self.ttl:
            self.hits += 1
            return entry.principal
        self.misses += 1
        generation = self._generation
        try:
            found = await off_loop(self.lookup, secret, now)
        except ControlPlaneUnavailable:
            if entry is not None and 0.0 <= now - entry.fetched < self.stale_ttl:
                return entry.principal  # verified moments ago; a revocation needs the control plane
            raise
        if found is None:
            self._entries.pop(key, None)
            return None
        if generation != self._generation:
            return found  # something changed meanwhile: answer this request, remember nothing
        self._entries[key] = _Entry(found, now)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return found

    def forget(self) -> None:
        """Drop every remembered principal (the next request of each token asks the control plane)."""
        self._entries.clear()
        self._generation += 1

    def __len__(self) -> int:
        return len(self._entries)


_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


class ForgetAfterChanges:
    """ASGI middleware: after a state-changing request outside the memory traffic (a POST to a
    page, ``/token``, ``/revoke``…) the cache forgets everything, so a revocation made through this
    gateway is honoured by the next request made after its answer. ``/mcp`` and the REST API
    (``/api/``) change memories, never tokens, so they keep the cache."""

    def __init__(
        self, app: ASGIApp, cache: PrincipalCache, *, keep: tuple[str, ...] = ("/mcp", "/api/")
    ) -> None:
        self.app, self.cache, self.keep = app, cache, keep

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        changes = (
            scope["type"] == "http"
            and str(scope.get("method", "GET")) not in _SAFE
            and not str(scope.get("path", "")).startswith(self.keep)
        )
        if not changes:
            await self.app(scope, receive, send)
            return

        async def forget_then_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.cache.forget()  # the change is made; before the client can act on the answer
            await send(message)

        try:
            await self.app(scope, receive, forget_then_send)
        finally:
            self.cache.forget()
