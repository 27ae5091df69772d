"""The fork server with real processes (gw:spawn, perf:cold-start, rel:kill, rel:load): engines are
forked from one warm template, watched and stopped though they are not the gateway's children, and
starts fall back to cold ones while the template is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from bench.processes import workspace_of
from gateway.control.records import Principal
from gateway.engines.calls import call_tool
from gateway.engines.forkserver import UNKNOWN_STATUS, ForkedEngine
from gateway.engines.supervisor import Supervisor
from gateway.errors import EngineStartTimeout
from tests.gateway.engines.test_supervisor import Clock, _until, alive, healthz, make_config, supervising

pytestmark = pytest.mark.anyio


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def starts(sup: Supervisor, kind: str) -> float:
    """``almanac_engine_starts_total{kind=…}`` as /metrics shows it."""
    return sup.metrics.registry.get_sample_value("almanac_engine_starts_total", {"kind": kind}) or 0.0


@pytest.mark.req("gw:spawn", "perf:cold-start", "rel:load")
async def test_workspaces_started_at_once_each_get_an_engine_forked_from_the_template(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path, start_concurrency=4)) as sup:
        with anyio.fail_after(60):
            await _until(lambda: sup.is_fork_server_ready, "the fork server")
            template = sup.fork_server_pid
            assert template is not None and parent_of(template) == os.getpid()
            assert threads_of(template) == 1  # fork() copies one thread: the template runs no other
            answers: dict[str, object] = {}

            async def wake(ws: str) -> None:
                principal = Principal("own_1", ws, "con_1", "fork test", False, None)
                async with sup.lease(ws) as lease:
                    answers[ws] = await call_tool(
                        lease.client, principal, "remember", {"statement": f"{ws} note"}
                    )

            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(wake, f"ws{i}")
        pids = sup.pids()
        assert sorted(pids) == [f"ws{i}" for i in range(4)] and len(set(pids.values())) == 4
        for ws, pid in pids.items():
            assert isinstance(answers[ws], dict), answers[ws]
            assert parent_of(pid) == template  # forked, not spawned by the gateway
            assert workspace_of(pid) == str(tmp_path / "workspaces" / ws)
            assert (tmp_path / "logs" / f"{ws}.log").exists()  # its own log, not the template's
            stored = "".join(p.read_text() for p in (tmp_path / "workspaces" / ws / "notes").rglob("*.md"))
            assert f"{ws} note" in stored and all(f"{o} note" not in stored for o in pids if o != ws)
        assert (starts(sup, "fork"), starts(sup, "cold")) == (4, 0)
        assert sup.fork_server_pid == template  # the template serves on after forking
    assert not any(alive(pid) for pid in [*pids.values(), template])


@pytest.mark.req("engine:idle", "gw:spawn")
async def test_a_forked_engine_idled_out_or_killed_is_seen_and_its_workspace_wakes_again(
    tmp_path: Path,
) -> None:
    clock = Clock()
    async with supervising(make_config(tmp_path, idle_timeout=60.0), clock) as sup:
        with anyio.fail_after(60):
            await _until(lambda: sup.is_fork_server_ready, "the fork server")
            template = sup.fork_server_pid
            assert await healthz(sup, "ws_a") == 200
            first = sup.pids()["ws_a"]
            assert parent_of(first) == template
            clock.now += 61
            assert await sup.stop_idle() == ["ws_a"]
            assert not alive(first) and not sup.is_running("ws_a")
            assert await healthz(sup, "ws_a") == 200
            second = sup.pids()["ws_a"]
            assert second != first and parent_of(second) == template
            os.kill(second, signal.SIGKILL)
            await _until(
                lambda: sup.pids().get("ws_a") not in (None, second) and sup.is_running("ws_a"), "a restart"
            )
            assert await healthz(sup, "ws_a") == 200
            assert parent_of(sup.pids()["ws_a"]) == template
        assert sup.metrics.engine_stops.labels("idle")._value.get() == 1
        assert sup.metrics.engine_crashes._value.get() == 1
        assert (starts(sup, "fork"), starts(sup, "cold")) == (3, 0)


@pytest.mark.req("gw:spawn", "rel:kill")
async def test_without_its_template_starts_are_cold_and_the_template_comes_back(tmp_path: Path) -> None:
    async with supervising(make_config(tmp_path)) as sup:
        with anyio.fail_after(90):
            await _until(lambda: sup.is_fork_server_ready, "the fork server")
            template = sup.fork_server_pid
            assert template is not None
            assert await healthz(sup, "ws_a") == 200
            forked = sup.pids()["ws_a"]
            os.kill(template, signal.SIGKILL)
            await _until(lambda: sup.fork_server_pid != template and not sup.is_fork_server_ready, "the loss")
            assert await healthz(sup, "ws_b") == 200
            assert parent_of(sup.pids()["ws_b"]) == os.getpid()  # spawned cold, by the gateway
            # the engine forked before goes on serving, now nobody's child but init's (or a subreaper's)
            assert alive(forked) and await healthz(sup, "ws_a") == 200 and sup.pids()["ws_a"] == forked
            await _until(lambda: sup.is_fork_server_ready, "the fork server back")
            assert sup.fork_server_pid not in (None, template)
            assert await healthz(sup, "ws_c") == 200
            assert parent_of(sup.pids()["ws_c"]) == sup.fork_server_pid
            await sup.stop("ws_a", reason="idle")  # an orphan is stopped, and its exit seen
            assert not alive(forked) and not sup.is_running("ws_a")
        assert (starts(sup, "fork"), starts(sup, "cold")) == (2, 1)
        assert sup.metrics.engine_crashes._value.get() == 0


def descendants() -> list[int]:
    """This process's live descendants running the engine (zombies left out): engines spawned or
    forked, templates."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split() if entry.name.isdigit() else []
        except OSError:
            continue
        if fields and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [os.getpid()]
    while frontier:
        kids = [pid for pid, parent in parents.items() if parent in frontier]
        found += kids
        frontier = kids
    return [pid for pid in found if b"engine" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.req("gw:spawn")
async def test_shutdown_with_forked_starts_queued_leaves_no_process(tmp_path: Path) -> None:
    config = make_config(tmp_path, start_concurrency=1, start_timeout=0.0)
    with anyio.fail_after(120):
        async with supervising(config) as sup:
            await _until(lambda: sup.is_fork_server_ready, "the fork server")
            for i in range(4):
                with pytest.raises(EngineStartTimeout):
                    await healthz(sup, f"ws{i}")
            await _until(lambda: "ws0" in sup.pids(), "the first fork")
            assert parent_of(sup.pids()["ws0"]) == sup.fork_server_pid
            assert sup.queue.depth + sup.queue.starting + len(sup.running()) == 4
        assert descendants() == [], "an engine or the template outlived the supervisor"


GATEWAY = """
import sys, anyio
from pathlib import Path
from tests.gateway.engines.test_supervisor import make_config, supervising, healthz, _until

async def main() -> None:
    async with supervising(make_config(Path(sys.argv[1]))) as sup:
        await _until(lambda: sup.is_fork_server_ready, "the fork server", timeout=60)
        assert await healthz(sup, "ws_a") == 200
        print(sup.fork_server_pid, sup.pids()["ws_a"], sup.config.run_dir / "ws_a.sock", flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


@pytest.mark.req("rel:kill")
def test_a_forked_engine_stops_when_the_gateway_process_is_killed(tmp_path: Path) -> None:
    gateway = subprocess.Popen(
        [sys.executable, "-c", GATEWAY, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert gateway.stdout is not None
    template_pid, engine_pid, socket = gateway.stdout.readline().split()
    template, engine = int(template_pid), int(engine_pid)
    try:
        assert parent_of(engine) == template and parent_of(template) == gateway.pid
        os.kill(gateway.pid, signal.SIGKILL)
        gateway.wait(timeout=30)
        gateway.stdout.close()
        anyio.run(
            _until, lambda: not alive(engine) and not alive(template), "the engine and template to stop"
        )
    finally:
        for pid in (engine, template):
            if alive(pid):  # pragma: no cover - only when the test fails
                os.kill(pid, signal.SIGKILL)
    assert not Path(socket).exists()  # a clean stop (SIGTERM, not a kill) removes its socket


@pytest.mark.req("gw:spawn", "rel:kill")
async def test_an_engine_whose_exit_the_template_never_reports_is_seen_gone_by_its_pidfd() -> None:
    """A stop, or a shutdown's shielded wait, must not wait for ever on a report that is not coming
    (the template gone first): the engine's own pidfd says it exited."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        engine = ForkedEngine(proc.pid)
        engine.signal(signal.SIGKILL)
        with anyio.fail_after(10):
            assert await engine.wait() == UNKNOWN_STATUS
        with anyio.fail_after(10), anyio.CancelScope(shield=True):  # as procs.kill waits
            assert await engine.wait() == UNKNOWN_STATUS
        assert engine.returncode == UNKNOWN_STATUS
    finally:
        proc.kill()
        proc.wait()
