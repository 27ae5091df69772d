"""The replay cache of the signed calls between nodes: each nonce accepted once within the
signature's window, in bounded memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cluster.replay import ReplayCache, Replayed

WINDOW = 30.0


@pytest.mark.req("run:scale-out")
def test_a_nonce_is_refused_within_the_window_and_forgotten_after_it() -> None:
    seen = ReplayCache(WINDOW)
    seen.admit("n1", 1000, now=1000)
    with pytest.raises(Replayed, match="already received"):
        seen.admit("n1", 1000, now=1000 + WINDOW)
    # past the window its timestamp alone refuses the call (the signature check): nothing is kept
    seen.admit("n2", 1031, now=1031)
    assert len(seen) == 1


@pytest.mark.req("run:scale-out")
def test_a_full_cache_forgets_the_oldest_and_refuses_calls_as_old_as_it() -> None:
    seen = ReplayCache(WINDOW, max_entries=3)
    for i, stamp in enumerate((100, 101, 102)):
        seen.admit(f"n{i}", stamp, now=102)
    seen.admit("n3", 103, now=103)  # n0 (signed at 100) is forgotten
    assert len(seen) == 3
    with pytest.raises(Replayed, match="more signed calls"):
        seen.admit("n0", 100, now=103)  # its replay is still refused
    seen.admit("n4", 104, now=104)  # a fresh call passes


@given(
    st.lists(
        st.tuples(st.sampled_from([f"n{i}" for i in range(8)]), st.integers(0, 40), st.integers(0, 40)),
        max_size=60,
    ),
    st.integers(1, 6),
)
def test_no_nonce_is_ever_admitted_twice_within_its_window(
    calls: list[tuple[str, int, int]], capacity: int
) -> None:
    """Whatever the capacity and the order: a captured call (its nonce and timestamp t: both are
    signed) is never admitted again while t is within the window (``now <= t + window``), and memory
    stays bounded."""
    seen = ReplayCache(10.0, max_entries=capacity)
    admitted: set[tuple[str, int]] = set()
    now = 0
    for nonce, stamp, step in calls:
        now += step // 10
        if abs(now - stamp) > 10:  # the signature check refuses it before the cache is asked
            continue
        try:
            seen.admit(nonce, stamp, now)
        except Replayed:
            continue
        assert (nonce, stamp) not in admitted
        admitted.add((nonce, stamp))
        assert len(seen) <= capacity
