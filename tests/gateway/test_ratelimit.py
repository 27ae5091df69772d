"""The per-connection token bucket the proxy and the address limits share (gw:route)."""

from __future__ import annotations

import pytest

from gateway.ratelimit import RateLimiter, take


@pytest.mark.req("gw:route")
def test_token_bucket() -> None:
    d = take(None, 0.0, rate=1.0, burst=2)
    assert d.allowed
    d = take(d.bucket, 0.0, rate=1.0, burst=2)
    assert d.allowed
    d = take(d.bucket, 0.0, rate=1.0, burst=2)
    assert not d.allowed and d.retry_after == pytest.approx(1.0)
    d = take(d.bucket, 0.5, rate=1.0, burst=2)
    assert not d.allowed and d.retry_after == pytest.approx(0.5)
    assert take(d.bucket, 1.0, rate=1.0, burst=2).allowed


@pytest.mark.req("gw:route")
def test_limiter_is_per_connection_and_bounded() -> None:
    limiter = RateLimiter(rate=1.0, burst=1, max_keys=10)
    assert limiter.check("a", 0.0).allowed
    assert not limiter.check("a", 0.0).allowed
    assert limiter.check("b", 0.0).allowed
    for i in range(10):
        limiter.check(f"k{i}", 1.0)
    assert not limiter.check("k0", 1.0).allowed  # a spent bucket is never forgotten
    limiter.check("late", 100.0)  # by now every other bucket has refilled: forgotten
    assert set(limiter._buckets) == {"late"}
