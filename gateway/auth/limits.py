"""Rate limits by client address on the endpoints anyone may call (``sec:authz``): dynamic client
registration, the token endpoint, sign-in and sign-up, and starting an authorization.

Each kind of request has its own token bucket per address: up to ``per_minute`` requests at once,
refilled at ``per_minute`` a minute. Past it the request is refused with 429 and ``Retry-After``
before any work is done. The address is the connection's peer — a ``X-Forwarded-For`` header is
believed only from the operator's ``trusted_proxies`` (applied by the server before the app sees
the request). IPv6 addresses count by their /64 prefix: one host is usually given a whole /64, so
counting single addresses would give it billions of buckets.

The buckets live in this process (a node of a cluster counts its own requests).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from gateway.ratelimit import RateLimiter

Kind = Literal["register", "token", "signin", "authorize"]

#: What each kind of request is called in a refusal.
WHAT: Mapping[Kind, str] = {
    "register": "client registrations",
    "token": "token requests",
    "signin": "sign-in attempts",
    "authorize": "authorization requests",
}


@dataclass(frozen=True)
class Refused:
    """Over the limit: what to tell the caller, and when to come back (whole seconds, at least 1)."""

    message: str
    retry_after: int


def address_key(remote: str | None) -> str:
    """The bucket an address counts in: itself (IPv4, or anything unparsable), or its IPv6 /64."""
    if not remote:
        return "unknown"
    try:
        ip = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return remote
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class AddressLimits:
    """One token bucket per (kind, address); built once by the composition root."""

    def __init__(self, per_minute: Mapping[Kind, int], *, clock: Callable[[], float]) -> None:
        self.per_minute = dict(per_minute)
        self.clock = clock
        self._limiters = {kind: RateLimiter(n / 60.0, n) for kind, n in per_minute.items()}

    def check(self, kind: Kind, remote: str | None) -> Refused | None:
        """Spend one request of ``kind`` from ``remote``'s bucket; :class:`Refused` when it is empty."""
        limiter = self._limiters.get(kind)
        if limiter is None:
            return None
        decision = limiter.check(address_key(remote), self.clock())
        if decision.allowed:
            return None
        wait = max(1, math.ceil(decision.retry_after))
        message = (
            f"too many {WHAT[kind]} from your address (at most {self.per_minute[kind]} a minute); "
            f"try again in {wait} s"
        )
        return Refused(message, wait)
