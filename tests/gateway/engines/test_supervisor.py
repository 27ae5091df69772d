"""The supervisor with real engine processes (gw:spawn, gw:503, engine:idle)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway import layout
from gateway.engines import policy
from gateway.engines.supervisor import ENGINE_KEEPALIVE_SECONDS, Supervisor, SupervisorConfig
from gateway.engines.wire import EngineTransport
from gateway.errors import EngineCapacity, EngineCrashLoop, EngineStartFailed
from gateway.metrics import Metrics
from tests.gateway.conftest import ENGINE

pytestmark = pytest.mark.anyio

FAILING = (sys.executable, "-c", "import sys; sys.exit(1)")


class Clock:
    """A clock the test moves by hand, so idle decisions need no waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_config(tmp_path: Path, **overrides: Any) -> SupervisorConfig:
    config = SupervisorConfig(
        engine_command=ENGINE,
        data_dir=tmp_path,
        run_dir=layout.runtime_dir(tmp_path, None),
        idle_timeout=3600.0,
        start_timeout=15.0,
        stop_timeout=5.0,
        max_engines=10,
        max_connections=10,
        retry_after=5.0,
        restart=policy.RestartPolicy(0.05, 1.0, crash_loop_threshold=5, crash_loop_window=60.0),
    )
    return replace(config, **overrides)


@asynccontextmanager
async def supervising(config: SupervisorConfig, clock: Clock | None = None) -> AsyncIterator[Supervisor]:
    kwargs = {"clock": clock} if clock else {}
    async with Supervisor(config, Metrics(), **kwargs) as sup:
        yield sup


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


async def healthz(sup: Supervisor, ws: str) -> int:
    async with sup.lease(ws) as lease:
        return (await lease.client.get("/healthz")).status_code


@pytest.mark.req("gw:spawn")
async def test_concurrent_first_calls_start_one_engine(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path)) as sup:
        codes: list[int] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(6):

                    async def call() -> None:
                        codes.append(await healthz(sup, "ws_a"))

                    tg.start_soon(call)
        assert codes == [200] * 6
        assert sup.metrics.cold_starts._value.get() == 1
        (pid,) = sup.pids().values()
        assert alive(pid)
        assert (tmp_path / "workspaces" / "ws_a").is_dir()
    assert not alive(pid), "the engine outlives the supervisor"


@pytest.mark.req("engine:idle", "gw:spawn")
async def test_idle_engines_stop_and_wake_on_the_next_call(tmp_path: Path) -> None:
    clock = Clock()
    async with supervising(make_config(tmp_path, idle_timeout=60.0), clock) as sup:
        with anyio.fail_after(30):
            async with sup.lease("ws_a"):
                first = sup.pids()["ws_a"]
                clock.now += 120
                assert await sup.stop_idle() == []  # a request in flight keeps it awake
            clock.now += 30
            assert await sup.stop_idle() == []  # not idle long enough yet
            clock.now += 31
            assert await sup.stop_idle() == ["ws_a"]
            assert not sup.is_running("ws_a") and not alive(first)
            assert await healthz(sup, "ws_a") == 200
            assert sup.pids()["ws_a"] != first
        assert sup.metrics.engine_stops.labels("idle")._value.get() == 1


@pytest.mark.req("engine:idle")
async def test_the_reaper_stops_idle_engines_by_itself(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path, idle_timeout=0.2)) as sup:
        with anyio.fail_after(30):
            assert await healthz(sup, "ws_a") == 200
            pid = sup.pids()["ws_a"]
            while "ws_a" in sup.pids():
                await anyio.sleep(0.02)
            assert not alive(pid)


@pytest.mark.req("gw:spawn", "gw:503")
async def test_the_cap_stops_idle_engines_first_and_refuses_when_all_are_busy(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path, max_engines=1)) as sup:
        with anyio.fail_after(60):
            async with sup.lease("ws_a"):
                with pytest.raises(EngineCapacity) as refused:
                    await healthz(sup, "ws_b")
                assert refused.value.retry_after == 5.0
                assert "ws_b" not in sup.pids()
            a = sup.pids()["ws_a"]
            assert await healthz(sup, "ws_b") == 200
            assert list(sup.pids()) == ["ws_b"] and not alive(a)
        assert sup.metrics.engine_stops.labels("capacity")._value.get() == 1


@pytest.mark.req("gw:spawn")
async def test_a_crashed_engine_is_restarted(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path)) as sup:
        with anyio.fail_after(30):
            assert await healthz(sup, "ws_a") == 200
            first = sup.pids()["ws_a"]
            os.kill(first, signal.SIGKILL)
            while sup.pids().get("ws_a") in (None, first) or not sup.is_running("ws_a"):
                await anyio.sleep(0.02)
            assert await healthz(sup, "ws_a") == 200
        assert sup.metrics.engine_crashes._value.get() == 1
        assert sup.metrics.cold_starts._value.get() == 2


@pytest.mark.req("gw:503")
async def test_start_failures_back_off_then_become_a_crash_loop(tmp_path: Path) -> None:
    restart = policy.RestartPolicy(0.0, 0.0, crash_loop_threshold=2, crash_loop_window=60.0)
    async with supervising(make_config(tmp_path, engine_command=FAILING, restart=restart)) as sup:
        with anyio.fail_after(30):
            with pytest.raises(EngineStartFailed, match="could not start"):
                await healthz(sup, "ws_a")
            with pytest.raises(EngineStartFailed):
                await healthz(sup, "ws_a")
            with pytest.raises(EngineCrashLoop) as loop:
                await healthz(sup, "ws_a")
        assert 55 < loop.value.retry_after <= 60
        assert sup.pids() == {}


@pytest.mark.req("gw:503")
async def test_a_locked_workspace_is_a_start_failure(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    workspace = tmp_path / "workspaces" / "ws_a"
    workspace.mkdir(parents=True)
    other = await anyio.open_process(
        [*ENGINE, "--socket", str(config.run_dir / "other.sock"), "--dir", str(workspace)]
    )
    try:
        with anyio.fail_after(30):
            while not (config.run_dir / "other.sock").exists():
                await anyio.sleep(0.02)
            async with supervising(config) as sup:
                with pytest.raises(EngineStartFailed, match="another engine holds the workspace lock"):
                    await healthz(sup, "ws_a")
    finally:
        other.terminate()
        await other.wait()


@pytest.mark.req("gw:503")
async def test_the_gateway_gives_up_idle_engine_connections_before_the_engine_does(tmp_path: Path) -> None:
    """Both sides' real settings: the engine must never close an idle connection the gateway may
    still reuse (that was the cold-start burst's "Server disconnected without sending a response")."""
    from engine.server import KEEP_ALIVE_SECONDS

    assert ENGINE_KEEPALIVE_SECONDS * 2 <= KEEP_ALIVE_SECONDS
    async with supervising(make_config(tmp_path)) as sup:
        with anyio.fail_after(60):
            async with sup.lease("ws_a") as lease:
                assert (await lease.client.get("/healthz")).status_code == 200
                assert isinstance(lease.transport, EngineTransport)
                assert lease.transport.connections == 1
                assert lease.transport.keepalive_expiry == ENGINE_KEEPALIVE_SECONDS


async def _until(condition: Any, what: str, timeout: float = 30.0) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


@pytest.mark.req("gw:spawn")
@pytest.mark.req("perf:cold-start")
async def test_a_warm_spare_takes_the_next_cold_start_and_is_replaced(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path, fork_server=False)) as sup:
        await _until(lambda: sup.spare_pid is not None, "a spare")
        first_spare = sup.spare_pid
        assert await healthz(sup, "ws1") == 200
        assert sup.pids()["ws1"] == first_spare  # the spare became ws1's engine
        await _until(lambda: sup.spare_pid not in (None, first_spare), "the next spare")
        assert (tmp_path / "logs" / "ws1.log").exists()
    assert first_spare is not None and not alive(first_spare)


@pytest.mark.req("gw:spawn")
async def test_without_a_spare_engines_start_the_ordinary_way(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path, warm_spare=False)) as sup:
        assert await healthz(sup, "ws1") == 200
        assert sup.spare_pid is None and sup.fork_server_pid is None


def _running_with(marker: str) -> list[int]:
    """Processes whose command line holds ``marker`` (zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (
                marker.encode() in (entry / "cmdline").read_bytes()
                and " Z " not in (entry / "stat").read_text()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.req("gw:spawn")
async def test_a_spare_being_started_when_the_supervisor_closes_is_stopped_not_left_running(
    tmp_path: Path,
) -> None:
    """A refill still starting its process when the gateway shuts down (a start that failed at
    once, then the exit): close waits for it and stops it, and no spare starts after close."""
    from gateway.engines.spare import WarmSpare

    marker = f"almanac-spare-test-{os.getpid()}-{id(tmp_path)}"
    spare = WarmSpare((sys.executable, "-c", "import sys; sys.stdin.read()", marker), tmp_path / "spare.log")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(spare.fill)
            await anyio.sleep(0)  # the fill has begun: it holds the lock while its process starts
            await spare.close(grace=5)
        assert spare.pid is None and _running_with(marker) == []
        await spare.fill()  # closed for good
        assert spare.pid is None and _running_with(marker) == []
