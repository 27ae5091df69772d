"""When a save is tried again (host:turn-loop): the pure rules of almanac.host.retry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from almanac.host.retry import MAX_BACKOFF_S, MAX_RETRY_AFTER_S, Wait, next_wait, parse_retry_after

pytestmark = pytest.mark.req("host:turn-loop")


def test_a_transport_failure_is_tried_again_at_once_then_after_a_doubling_backoff() -> None:
    waits = [next_wait(n, None, remaining=100).seconds for n in range(1, 9)]
    assert waits == [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_retry_after_is_waited_exactly_when_it_ends_before_the_deadline() -> None:
    assert next_wait(1, 1.0, remaining=30) == Wait(1.0)
    assert next_wait(7, 2.0, remaining=30) == Wait(2.0)  # not the backoff: the server said when


def test_retry_after_past_the_deadline_gives_up_at_once_saying_why() -> None:
    wait = next_wait(1, 30.0, remaining=20)
    assert wait.seconds is None and "30 s" in wait.why and "20.0 s left" in wait.why


def test_no_time_left_gives_up() -> None:
    assert next_wait(3, None, remaining=0).seconds is None


@given(st.integers(1, 1000), st.floats(0, 1e6) | st.none(), st.floats(-10, 1e6))
def test_a_wait_never_passes_the_deadline(failures: int, retry_after: float | None, remaining: float) -> None:
    wait = next_wait(failures, retry_after, remaining)
    if wait.seconds is not None:
        assert 0 <= wait.seconds <= remaining
        assert wait.seconds <= (MAX_BACKOFF_S if retry_after is None else retry_after)
    else:
        assert wait.why


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("1", 1.0),
        (" 30 ", 30.0),
        ("999999", MAX_RETRY_AFTER_S),
        ("Fri, 04 Dec 2026 10:00:05 GMT", 5.0),
        ("Fri, 04 Dec 2026 09:00:00 GMT", 0.0),  # a date gone by: at once
        (None, None),
        ("soon", None),
        ("-1", None),
        ("1.5", None),
    ],
)
def test_retry_after_header(header: str | None, seconds: float | None) -> None:
    now = 1796378400.0  # Fri, 04 Dec 2026 10:00:00 GMT
    assert parse_retry_after(header, now=now) == seconds
