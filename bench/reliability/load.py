"""``rel:load``: a bounded load run on loopback, with workspaces sleeping and waking.

``clients`` clients spread over ``workspaces`` workspaces call the gateway for ``seconds``: writes
(the mixed stream of :mod:`bench.reliability.workload`) and reads (``get_context``,
``retrieve_memory``). Each workspace is busy for ``active`` seconds, then rests until its engine has
idled out (a short idle timeout), then is woken by the next call; and so on. Every call
is timed; errors are counted by kind (only 429 and 503 are intended); at the end every
acknowledged write is read back through the tools and found on disk.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client

from bench.processes import percentile, wait_until
from bench.reliability.check import check_disk, check_tools
from bench.reliability.procs import GatewayRun
from bench.reliability.workload import Journal, Writer, error_kind

# 429 and 503 are the only refusals the gateway means: a 2025-era session outlives its workspace
# going to sleep (gateway.edge.sessions), so "Session not found" is an error like any other.
INTENDED = ("http 429", "http 503")


@dataclass
class LoadResult:
    clients: int
    workspaces: int
    seconds: float
    idle_timeout: float
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    journals: dict[str, Journal] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    cold_starts: int = 0
    idle_stops: int = 0
    elapsed: float = 0.0

    @property
    def calls(self) -> int:
        return len(self.latencies) + sum(self.errors.values())

    @property
    def unintended(self) -> int:
        return sum(n for kind, n in self.errors.items() if kind not in INTENDED)

    def row(self) -> dict[str, str]:
        ms = [x * 1000 for x in self.latencies] or [float("nan")]
        return {
            "clients × workspaces × s": f"{self.clients} × {self.workspaces} × {self.seconds:g}",
            "calls": str(self.calls),
            "calls/s": f"{self.calls / self.elapsed:.0f}" if self.elapsed else "-",
            "p50 / p95 / p99 ms": " / ".join(f"{percentile(ms, q):.0f}" for q in (0.5, 0.95, 0.99)),
            "writes (all read back)": str(sum(j.acked for j in self.journals.values())),
            "engine cold starts / idle stops": f"{self.cold_starts} / {self.idle_stops}",
            "errors by kind": ", ".join(f"{k}: {n}" for k, n in sorted(self.errors.items())) or "none",
            "lost": str(len(self.problems)),
        }


def _metric(text: str, name: str) -> int:
    total = 0.0
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series == name or series.startswith(name + "{"):
            total += float(value)
    return int(total)


async def run_load(
    root: Path,
    clients: int,
    workspaces: int,
    seconds: float,
    rng: random.Random,
    *,
    idle_timeout: float = 1.0,
    active: float = 5.0,
) -> LoadResult:
    result = LoadResult(clients, workspaces, seconds, idle_timeout)
    gw = GatewayRun(root, {"engine_idle_timeout": str(idle_timeout), "engine_start_timeout": "60"})
    tokens = gw.seed(workspaces, "load")
    result.journals = {t: Journal() for t in tokens}
    gw.start()
    began = time.monotonic()
    deadline = began + seconds
    resting = {w: False for w in range(workspaces)}

    def asleep(token: str) -> None:
        wait_until(lambda: gw.engine_pid(token) is None, 120, "an idle engine to stop")

    served = [0] * workspaces

    async def busy(w: int, calls: int) -> None:
        """Until the workspace has answered ``calls`` more calls (or the run is over)."""
        target = served[w] + calls
        with anyio.fail_after(seconds + 120):
            while served[w] < target and time.monotonic() < deadline:
                await anyio.sleep(0.02)

    async def conductor(w: int) -> None:
        """Workspace ``w`` is busy for ``active`` seconds once it answers calls, then rests until its
        engine has idled out (conditions, so a slow host only makes the cycles longer)."""
        while time.monotonic() < deadline:
            await busy(w, 2 * max(1, clients // workspaces))
            await anyio.sleep(active)
            resting[w] = True
            await anyio.to_thread.run_sync(asleep, tokens[w])
            resting[w] = False

    async def timed_client(i: int) -> None:
        w = i % workspaces
        token = tokens[w]
        writer = Writer(f"l{i}", result.journals[token], random.Random(rng.getrandbits(64)))
        while time.monotonic() < deadline:
            if resting[w]:
                await anyio.sleep(0.05)
                continue
            try:
                async with gw.connect(token) as client:
                    stop = lambda: resting[w] or time.monotonic() >= deadline  # noqa: E731
                    await _calls(client, writer, result, stop, lambda: served.__setitem__(w, served[w] + 1))
            except Exception as exc:
                result.errors[error_kind(exc)] += 1
                await anyio.sleep(0.05)

    try:
        async with anyio.create_task_group() as tg:
            for w in range(workspaces):
                tg.start_soon(conductor, w)
            for i in range(clients):
                tg.start_soon(timed_client, i)
        result.elapsed = time.monotonic() - began
        for journal in result.journals.values():
            result.errors.update(journal.errors)
        metrics = gw.metrics()
        result.cold_starts = _metric(metrics, "almanac_engine_cold_starts_total")
        result.idle_stops = _metric(metrics, 'almanac_engine_stops_total{reason="idle"}')
        for token, journal in result.journals.items():
            async with gw.connect(token) as client:
                result.problems += await check_tools(client, journal)
            result.problems += check_disk(gw.workspace(token), journal)
    finally:
        if gw.stop() != 0:
            result.problems.append("the gateway did not exit 0 on SIGTERM")
    return result


async def _calls(
    client: Client, writer: Writer, result: LoadResult, stop: Callable[[], bool], answered: Callable[[], None]
) -> None:
    while not stop():
        began = time.perf_counter()
        roll = writer.rng.random()
        if roll < 0.5:
            await writer.send(client, writer.next_write())
        elif roll < 0.8:
            reply = await client.call_tool("get_context", {"query": f"fjord {writer.rng.randint(0, 50)}"})
            if reply.is_error:
                result.errors["get_context refused"] += 1
                continue
        else:
            reply = await client.call_tool("retrieve_memory", {"subject": f"{writer.name} item 1"})
            if reply.is_error:
                result.errors["retrieve_memory refused"] += 1
                continue
        result.latencies.append(time.perf_counter() - began)
        answered()
