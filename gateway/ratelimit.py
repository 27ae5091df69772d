"""Rate limits (``gw:route``): a token bucket, pure, plus a tiny in-memory holder of buckets by key.

The proxy keys it by connection; :mod:`gateway.auth.limits` by client address.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    tokens: float
    updated: float


@dataclass(frozen=True)
class Decision:
    allowed: bool
    bucket: Bucket
    retry_after: float


def take(bucket: Bucket | None, now: float, rate: float, burst: int) -> Decision:
    """Spend one token from a bucket refilled at ``rate`` per second up to ``burst``."""
    if bucket is None:
        bucket = Bucket(float(burst), now)
    tokens = min(float(burst), bucket.tokens + max(0.0, now - bucket.updated) * rate)
    if tokens >= 1.0:
        return Decision(True, Bucket(tokens - 1.0, now), 0.0)
    return Decision(False, Bucket(tokens, now), (1.0 - tokens) / rate)


class RateLimiter:
    """Buckets by key (a connection id, so the keys are bounded by the live tokens). When it grows
    large, full buckets are forgotten: a new one starts full, so nothing changes."""

    def __init__(self, rate: float, burst: int, *, max_keys: int = 100_000) -> None:
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._buckets: dict[str, Bucket] = {}

    def check(self, key: str, now: float) -> Decision:
        decision = take(self._buckets.get(key), now, self.rate, self.burst)
        self._buckets[key] = decision.bucket
        if len(self._buckets) > self.max_keys:
            self._buckets = {k: b for k, b in self._buckets.items() if not self._full(b, now)}
        return decision

    def _full(self, bucket: Bucket, now: float) -> bool:
        return bucket.tokens + (now - bucket.updated) * self.rate >= self.burst
