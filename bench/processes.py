"""Starting and watching the processes a bench measures: a real ``almanac serve``, its engines
and embedder, their CPU, memory and wake-ups, and waiting on them with a bound."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway import layout
from gateway.control.store import ControlPlane
from gateway.engines.procs import rss_bytes

ALMANAC = str(Path(sys.executable).parent / "almanac")


MB = 1024 * 1024


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str


def serve(data_dir: Path, log: Path, settings: dict[str, str] | None = None) -> Served:
    """``almanac serve`` on port 0; ``settings`` are extra ``ALMANAC_*`` variables (name: value)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env |= {"ALMANAC_LOG_LEVEL": "warning", "ALMANAC_MAX_ENGINES": "200"}
    env |= {"ALMANAC_RATE_LIMIT_BURST": "100000", "ALMANAC_RATE_LIMIT_PER_SECOND": "100000"}
    env |= {f"ALMANAC_{k.upper()}": v for k, v in (settings or {}).items()}
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [ALMANAC, "serve", "--port", "0", "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    assert proc.stdout is not None
    first = proc.stdout.readline().decode()
    proc.stdout.close()
    url = first.split()[-1].removesuffix("/mcp")
    if not url.startswith("http"):
        raise RuntimeError(f"almanac serve did not start; see {log}")
    ready = httpx2.Client(timeout=2)
    wait_until(lambda: _ok(ready, url + "/readyz"), 30, "the gateway")
    ready.close()
    return Served(proc, url)


def _ok(client: httpx2.Client, url: str) -> bool:
    try:
        return client.get(url).status_code == 200
    except httpx2.TransportError:
        return False


def accepting(sock: Path) -> bool:
    """Whether something accepts connections on the Unix socket ``sock`` now."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(sock))
        except OSError:
            return False
        return True


def wait_engine(sock: Path, timeout: float = 30.0) -> None:
    """Until the engine on ``sock`` answers ``GET /healthz`` (the socket file exists a little earlier)."""
    wait_until(lambda: accepting(sock), timeout, f"engine {sock}")
    with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(sock)), timeout=10) as client:
        client.get("http://localhost/healthz").raise_for_status()


def metric_mean(url: str, histogram: str) -> float:
    """Mean of a Prometheus histogram on the gateway's /metrics (sum / count)."""
    text = httpx2.get(url + "/metrics", timeout=10).text
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith(histogram + "_"))
    count = float(values.get(histogram + "_count", "0"))
    return float(values.get(histogram + "_sum", "0")) / count if count else float("nan")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


def workspace_of(pid: int) -> str | None:
    """The workspace an engine serves: the directory of the lock file it holds open."""
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.endswith("/.almanac.lock"):
            return str(Path(target).parent)
    return None


def engine_children(pid: int) -> dict[str, int]:
    """The gateway's engine processes by role: workspace dir for engines (its children, or the fork
    server's), ``embedder`` for the embedder service, ``spare`` for the warm engine holding no
    workspace (a warm spare, or the fork server's template)."""
    found: dict[str, int] = {}
    for child in _children(pid):
        argv = _argv(child)
        if "engine.embed" in argv:
            found["embedder"] = child
        elif "--fork-server" in argv:
            found["spare"] = child
            for forked in _children(child):
                served = workspace_of(forked)
                if served is not None:
                    found[served] = forked
        elif "engine" in argv:
            found[workspace_of(child) or "spare"] = child
    return found


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
    return found


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:  # the process exited meanwhile
        return []


#: Where the kernel parks a process blocked reading its stdin: a pipe (asyncio's subprocesses) or
#: a socket pair (uvloop's, libuv's stdio for a child); a fork server waits in epoll instead.
STDIN_WAITS = ("pipe_read", "unix_stream_read", "epoll_wait")


def wait_for_spare(gateway_pid: int, timeout: float = 30.0) -> None:
    """Bounded wait until the gateway has a warm spare engine waiting (its imports done: it blocks
    reading its assignment on stdin)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = engine_children(gateway_pid).get("spare")
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text(encoding="utf-8") if pid is not None else ""
        except OSError:  # the spare exited meanwhile
            wchan = ""
        if any(wait in wchan for wait in STDIN_WAITS):
            return
        time.sleep(0.02)
    raise TimeoutError("no warm spare engine appeared")


@asynccontextmanager
async def client_for(url: str, *, token: str | None = None, uds: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx2.AsyncHTTPTransport(uds=uds) if uds else None
    http = httpx2.AsyncClient(headers=headers, timeout=60, transport=transport)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def cpu_seconds(pid: int, task: int | None = None) -> float:
    """User + system CPU a process (or one of its threads) has used so far (Linux ``/proc``)."""
    stat = Path(f"/proc/{pid}/task/{task}/stat" if task else f"/proc/{pid}/stat")
    fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> dict[int, int]:
    """Wake-ups so far of each thread of a process, by thread id: its voluntary context switches
    (it blocked — on a lock, the interpreter's lock, a socket, a disk write — and was woken again;
    Linux ``/proc``). Preemptions by other processes (involuntary switches) are left out: they
    measure the host's load, not the engine."""
    found: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            lines = (task / "status").read_text(encoding="utf-8").splitlines()
        except OSError:  # the thread ended meanwhile
            continue
        counts = [int(ln.split()[1]) for ln in lines if ln.startswith("voluntary_ctxt_switches:")]
        found[int(task.name)] = sum(counts)
    return found


def background_cpu() -> float:
    """CPU of this process's threads other than the main one (an in-process engine's indexer)."""
    main, total = threading.main_thread().native_id, 0.0
    for task in Path("/proc/self/task").iterdir():
        if int(task.name) != main:
            try:
                total += cpu_seconds(os.getpid(), int(task.name))
            except (OSError, ValueError):  # the thread ended meanwhile
                continue
    return total


def pss_bytes(pid: int) -> int:
    """Proportional set size: private pages plus a fair share of pages shared with other processes
    (libraries mapped by every engine). Summed over processes it is the memory they really use."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="utf-8").splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def settled_rss(pid: int, timeout: float = 20.0) -> int:
    """RSS once it stops moving (background work such as loading a model has finished)."""
    last, stable_since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = rss_bytes(pid) or 0
        if abs(now - last) > 256 * 1024:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since > 1.0:
            break
        time.sleep(0.1)
    return last


def seed_owners(data_dir: Path, count: int, prefix: str) -> dict[str, str]:
    """``count`` owners, each with a token for their default workspace: {token: workspace id}."""
    store = ControlPlane.open(layout.control_db(data_dir.resolve()))
    try:
        tokens = {}
        for i in range(count):
            owner, ws = store.owners.create(f"{prefix}{i}@bench.example", None)
            tokens[store.connections.create_pat(owner.id, ws.id, "bench")[1]] = ws.id
        return tokens
    finally:
        store.close()
