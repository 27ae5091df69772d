"""Cold-start bursts with real engine processes (gw:spawn, gw:503): starts are queued with bounded
concurrency, a start outlives the caller's wait instead of being killed, Retry-After follows the
queue, and shutdown leaves nothing running."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from gateway.engines.supervisor import Supervisor
from gateway.errors import EngineStartFailed, EngineStartTimeout, WorkspaceNotFound
from tests.gateway.engines.test_supervisor import alive, healthz, make_config, supervising

pytestmark = pytest.mark.anyio

BURST = 6


def children() -> list[int]:
    """This process's live children (zombies left out): every engine the supervisor spawned."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def gauge(sup: Supervisor, name: str) -> float:
    value = sup.metrics.registry.get_sample_value(name)
    assert value is not None, name
    return value


@pytest.mark.req("gw:spawn")
async def test_a_burst_larger_than_the_concurrency_is_queued(tmp_path: Path) -> None:
    config = make_config(tmp_path, start_concurrency=2, warm_spare=False, start_timeout=120.0)
    async with supervising(config) as sup:
        seen = {"starting processes": 0, "starting gauge": 0.0, "queued gauge": 0.0}
        codes: list[int] = []

        def look() -> None:
            starting = len(children()) - len(sup.running())  # spawned, not yet healthy
            seen["starting processes"] = max(seen["starting processes"], starting)
            seen["starting gauge"] = max(seen["starting gauge"], gauge(sup, "almanac_engines_starting"))
            seen["queued gauge"] = max(seen["queued gauge"], gauge(sup, "almanac_engine_starts_queued"))

        async def call(ws: str) -> None:
            codes.append(await healthz(sup, ws))

        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                for i in range(BURST):
                    tg.start_soon(call, f"ws{i}")
                while len(codes) < BURST:
                    look()
                    await anyio.sleep(0.005)
        assert codes == [200] * BURST
        assert seen["starting processes"] == 2, seen  # never more than 2 at once, and 2 were
        assert seen["starting gauge"] == 2, seen
        assert seen["queued gauge"] >= BURST - 2, seen  # the rest waited their turn
        assert sup.metrics.cold_starts._value.get() == BURST
        assert gauge(sup, "almanac_engine_starts_queued") == 0 == gauge(sup, "almanac_engines_starting")
        assert len(children()) == BURST


@pytest.mark.req("gw:503", "gw:spawn")
async def test_a_start_that_outlives_the_callers_wait_goes_on_and_the_retry_needs_no_new_spawn(
    tmp_path: Path,
) -> None:
    async with supervising(make_config(tmp_path, start_timeout=0.0, warm_spare=False)) as sup:
        with anyio.fail_after(120):
            with pytest.raises(EngineStartTimeout, match="not ready yet") as first:
                await healthz(sup, "ws_a")
            assert first.value.retry_after >= 1
            pid = None
            while pid is None:  # the start goes on: its process is spawned after the caller left
                pid = sup.pids().get("ws_a")
                await anyio.sleep(0.01)
            retries = 0
            while True:
                try:
                    assert await healthz(sup, "ws_a") == 200
                    break
                except EngineStartTimeout:
                    retries += 1
                    assert sup.pids().get("ws_a") == pid and alive(pid), "the starting engine was replaced"
                    await anyio.sleep(0.01)
        assert sup.pids()["ws_a"] == pid and alive(pid)
        assert sup.metrics.cold_starts._value.get() == 1
        assert sup.slot("ws_a").failures == ()  # a caller giving up is no failure


@pytest.mark.req("gw:503")
async def test_retry_after_grows_with_the_position_in_the_queue(tmp_path: Path) -> None:
    config = make_config(tmp_path, start_concurrency=1, start_timeout=0.0, warm_spare=False)
    async with supervising(config) as sup:
        waits: list[float] = []
        with anyio.fail_after(60):
            for i in range(4):
                with pytest.raises(EngineStartTimeout) as refused:
                    await healthz(sup, f"ws{i}")
                waits.append(refused.value.retry_after)
                if i:
                    assert f"({sup.queue.ahead_of(f'ws{i}')} ahead of it)" in str(refused.value)
        assert all(w >= 1 for w in waits)
        assert waits == sorted(waits) and waits[0] < waits[-1], waits
        # nothing measured yet: the prior (retry_after = 5 s) stands in for one start
        assert waits[-1] - waits[-2] == pytest.approx(5.0, abs=0.5)


@pytest.mark.req("gw:spawn")
async def test_shutdown_with_starts_queued_leaves_no_process(tmp_path: Path) -> None:
    """The first start takes the warm spare; the refill waits for the queue to empty; shutdown
    comes while one start is under way and the rest are queued."""
    config = make_config(tmp_path, start_concurrency=1, start_timeout=0.0, fork_server=False)
    with anyio.fail_after(120):
        async with supervising(config) as sup:
            while sup.spare_pid is None:
                await anyio.sleep(0.01)
            spare = sup.spare_pid
            for i in range(4):
                with pytest.raises(EngineStartTimeout):
                    await healthz(sup, f"ws{i}")
            while "ws0" not in sup.pids():  # the first start has its process (the spare)
                await anyio.sleep(0.01)
            assert sup.queue.depth == 3 and sup.queue.starting == 1
            assert sup.pids()["ws0"] == spare  # the spare serves the first start of the burst
            assert sup.spare_pid is None  # taken, and not refilled while starts are queued
            assert len(children()) == 1
        assert children() == [], "an engine outlived the supervisor"


@pytest.mark.req("gw:spawn", "gw:503")
async def test_a_stuck_start_is_killed_after_the_kill_timeout_and_counts_as_a_failure(tmp_path: Path) -> None:
    """Two stuck starts, one at a time: each is killed once its own process has had the kill timeout
    (the second's time waiting in the queue does not count against it)."""
    stuck = (sys.executable, "-c", "import time; time.sleep(600)")
    config = make_config(
        tmp_path, engine_command=stuck, start_kill_timeout=1.0, start_concurrency=1, warm_spare=False
    )
    async with supervising(config) as sup:
        failed_after: dict[str, float] = {}
        began = anyio.current_time()

        async def call(ws: str) -> None:
            with pytest.raises(EngineStartFailed, match="did not answer within 1 s and was stopped"):
                await healthz(sup, ws)
            failed_after[ws] = anyio.current_time() - began

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for ws in ("ws_a", "ws_b"):
                    tg.start_soon(call, ws)
        assert failed_after["ws_a"] >= 1.0 and failed_after["ws_b"] >= 2.0, failed_after
        assert children() == [] and sup.pids() == {}
        assert len(sup.slot("ws_a").failures) == len(sup.slot("ws_b").failures) == 1


@pytest.mark.req("gw:spawn")
async def test_erasing_a_workspace_calls_off_its_start_queued_or_under_way(tmp_path: Path) -> None:
    config = make_config(tmp_path, start_concurrency=1, start_timeout=60.0, warm_spare=False)
    async with supervising(config) as sup:
        outcome: dict[str, str] = {}

        async def call(ws: str) -> None:
            try:
                await healthz(sup, ws)
                outcome[ws] = "served"
            except WorkspaceNotFound:
                outcome[ws] = "erased"

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for ws in ("ws_a", "ws_b"):
                    tg.start_soon(call, ws)
                while "ws_a" not in sup.pids() or sup.queue.depth != 1:  # a spawned, b queued
                    await anyio.sleep(0.005)
                await sup.retire("ws_a")
                await sup.retire("ws_b")
        assert outcome == {"ws_a": "erased", "ws_b": "erased"}
        assert children() == [] and sup.metrics.cold_starts._value.get() == 0


@pytest.mark.req("gw:spawn", "engine:idle")
async def test_a_start_nobody_waits_for_any_more_finishes_then_idles_out(tmp_path: Path) -> None:
    """The reaper never takes a queued or starting engine for idle: the start the caller left
    finishes (one cold start, no failure), and only then is the engine stopped as idle."""
    config = make_config(tmp_path, idle_timeout=0.2, start_timeout=0.0, warm_spare=False)
    async with supervising(config) as sup:
        with anyio.fail_after(120):
            with pytest.raises(EngineStartTimeout):
                await healthz(sup, "ws_a")
            while sup.metrics.engine_stops.labels("idle")._value.get() < 1:
                await anyio.sleep(0.01)
        assert sup.metrics.cold_starts._value.get() == 1
        assert sup.metrics.engine_crashes._value.get() == 0 and sup.slot("ws_a").failures == ()
        assert children() == []
