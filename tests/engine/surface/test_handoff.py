"""Tool threads (engine.surface.handoff): the work of a call off the event loop, one wake-up each way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from engine.surface.handoff import ToolThreads


def test_work_runs_on_a_tool_thread_and_its_result_or_error_comes_back() -> None:
    threads = ToolThreads(4, "test-tool")

    def boom() -> None:
        raise ValueError("refused")

    async def main() -> tuple[str, str]:
        name = await threads.run(lambda: threading.current_thread().name)
        with pytest.raises(ValueError, match="refused"):
            await threads.run(boom)
        return name, threading.current_thread().name

    worker, loop_thread = asyncio.run(main())
    assert worker.startswith("test-tool_") and worker != loop_thread


def test_calls_one_after_another_keep_to_one_thread() -> None:
    threads = ToolThreads(4, "test-tool")

    async def main() -> set[str]:
        return {await threads.run(lambda: threading.current_thread().name) for _ in range(50)}

    assert len(asyncio.run(main())) == 1  # the executor alternated between two here


def test_calls_at_once_run_side_by_side_up_to_the_limit_then_wait_their_turn() -> None:
    threads = ToolThreads(3, "test-tool")
    inside, release = threading.Semaphore(0), threading.Event()
    running, most = 0, 0
    count = threading.Lock()

    def hold() -> str:
        nonlocal running, most
        with count:
            running += 1
            most = max(most, running)
        inside.release()
        assert release.wait(10)
        with count:
            running -= 1
        return threading.current_thread().name

    async def main() -> list[str]:
        calls = [asyncio.ensure_future(threads.run(hold)) for _ in range(5)]
        for _ in range(3):  # three start at once; the other two wait for a thread
            assert await asyncio.to_thread(inside.acquire, True, 10)
        assert not inside.acquire(timeout=0.2) and threads.busy() == [f"test-tool_{i}" for i in range(3)]
        release.set()
        return list(await asyncio.gather(*calls))

    names = asyncio.run(main())
    assert most == 3 and len(set(names)) == 3 and threads.busy() == []


def test_a_caller_that_stops_waiting_does_not_stop_the_work() -> None:
    threads = ToolThreads(2, "test-tool")
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def write() -> None:
        started.set()
        assert release.wait(10)
        finished.set()

    async def main() -> None:
        call = asyncio.ensure_future(threads.run(write))
        assert await asyncio.to_thread(started.wait, 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        assert await asyncio.to_thread(finished.wait, 10)  # the write ran to its end
        assert await threads.run(lambda: 7) == 7  # and the thread serves the next call

    asyncio.run(main())


def test_started_work_says_what_follows_once_its_thread_is_idle(caplog: pytest.LogCaptureFixture) -> None:
    """``start``: no future, no wake-up of the loop; what the job returns runs once its thread
    is idle again (a caller woken by it finds the same thread free), and a job that fails is logged
    while the thread carries on serving."""
    threads = ToolThreads(1, "test-tool")  # one thread: the failing job, then the other
    seen: list[tuple[str, list[str]]] = []
    done = threading.Event()

    def job() -> Callable[[], None]:
        ran_on = threading.current_thread().name

        def then() -> None:
            seen.append((ran_on, threads.busy()))
            done.set()

        return then

    def boom() -> None:
        raise ValueError("lost")

    threads.start(boom)
    threads.start(job)
    assert done.wait(10)
    ((ran_on, busy),) = seen
    assert ran_on.startswith("test-tool_") and busy == []  # idle before what follows ran
    assert "a tool thread's job failed" in caplog.text and "lost" in caplog.text

    async def after_it() -> str:
        return await threads.run(lambda: threading.current_thread().name)

    assert asyncio.run(after_it()).startswith("test-tool_")  # and they serve the next call
