"""The start queue on its own: the Retry-After estimate, and fair turns (gw:503, gw:spawn)."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.engines import startq
from gateway.engines.startq import RETRY_AFTER_MAX, StartQueue

seconds = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False)


@pytest.mark.req("gw:503")
@given(ahead=st.integers(0, 500), start=seconds, concurrency=st.integers(1, 64))
def test_retry_after_grows_with_the_queue_and_stays_bounded(
    ahead: int, start: float, concurrency: int
) -> None:
    here = startq.retry_after(ahead=ahead, elapsed=0.0, start_seconds=start, concurrency=concurrency)
    behind = startq.retry_after(ahead=ahead + 1, elapsed=0.0, start_seconds=start, concurrency=concurrency)
    assert 1.0 <= here <= behind <= RETRY_AFTER_MAX
    exact = (ahead + 1) * start / concurrency + start
    assert here == min(RETRY_AFTER_MAX, max(1.0, exact))


@pytest.mark.req("gw:503")
@given(elapsed=seconds, start=seconds, concurrency=st.integers(1, 64))
def test_retry_after_for_a_start_under_way_is_what_is_left_of_one_start(
    elapsed: float, start: float, concurrency: int
) -> None:
    left = startq.retry_after(ahead=None, elapsed=elapsed, start_seconds=start, concurrency=concurrency)
    assert left == min(RETRY_AFTER_MAX, max(1.0, start - elapsed))


@pytest.mark.req("gw:503")
def test_the_start_time_is_the_mean_of_the_recent_measured_starts() -> None:
    queue = StartQueue(2, prior=5.0)
    assert queue.start_seconds == 5.0  # nothing measured yet
    for s in (2.0, 4.0):
        queue.record_start(s)
    assert queue.start_seconds == 3.0
    for _ in range(startq.MEASURED_STARTS):
        queue.record_start(1.0)
    assert queue.start_seconds == 1.0  # only the recent ones count


def test_the_default_concurrency_is_the_cores_this_process_may_use() -> None:
    import os

    assert startq.default_concurrency() == len(os.sched_getaffinity(0)) >= 1


@pytest.mark.req("gw:spawn")
@pytest.mark.anyio
async def test_turns_are_first_come_first_served_and_bounded() -> None:
    queue = StartQueue(2, prior=1.0)
    order: list[str] = []
    most = 0
    release = anyio.Event()

    async def start(key: str) -> None:
        nonlocal most
        async with queue.turn(key):
            order.append(key)
            most = max(most, queue.starting)
            await release.wait()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for key in "abcde":
                queue.enqueue(key)
                tg.start_soon(start, key)
            while queue.starting < 2:
                await anyio.sleep(0.001)
            assert queue.depth == 3 and queue.ahead_of("e") == 2 and queue.ahead_of("a") is None
            assert queue.retry_after("c") == 1 * 1.0 / 2 + 1.0
            assert queue.retry_after("e") == 3 * 1.0 / 2 + 1.0
            release.set()
    assert order == list("abcde") and most == 2
    assert queue.depth == queue.starting == 0
    await queue.idle()  # returns at once when nothing is queued


@pytest.mark.req("gw:spawn")
@pytest.mark.anyio
async def test_a_start_called_off_while_queued_leaves_the_queue() -> None:
    queue = StartQueue(1, prior=1.0)
    queue.enqueue("a")
    queue.enqueue("b")
    with anyio.fail_after(10):
        async with queue.turn("a"):
            with anyio.move_on_after(0.05):
                async with queue.turn("b"):
                    pytest.fail("b got a turn while a held the only place")
            assert queue.depth == 0
        queue.withdraw("b")  # already gone: nothing happens
        queue.enqueue("c")
        queue.withdraw("c")
        assert queue.depth == 0
