"""A burst of cold starts: ``count`` workspaces with no engine running, all called at the same moment.

The gateway runs with its default settings (``gateway.settings.Settings``: the shared embedder on,
the default start timeout, start concurrency and engine cap); ``settings`` may change some for a
comparison. Each workspace's first call is an MCP ``initialize`` through the real gateway. A 503
is answered the way a client should: wait the ``Retry-After`` it carries, then call again. Once a
workspace answers, a real ``remember`` through the ``mcp`` client checks it works. Counted: how
many answered the first call, how many after one honoured ``Retry-After``, how many needed more,
the time until all were ready, and the host's load average during the run (``/proc/loadavg``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from prometheus_client.parser import text_string_to_metric_families

from bench.reliability.procs import GatewayRun
from bench.reliability.workload import error_kind
from gateway.settings import Settings

#: A workspace not ready after this long counts as failed.
GIVE_UP_SECONDS = 900.0

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench.reliability.cold", "version": "1"},
    },
}


def default_settings() -> dict[str, str]:
    """The defaults of what the bench's gateway otherwise changes (embedder, engine cap, rate limits)."""
    d = Settings()
    return {
        "embedder": str(d.embedder).lower(),
        "max_engines": str(d.max_engines),
        "rate_limit_burst": str(d.rate_limit_burst),
        "rate_limit_per_second": str(d.rate_limit_per_second),
    }


def metric(text: str, name: str) -> float:
    """The sum of a metric's samples named ``name`` in a ``/metrics`` page (over all labels)."""
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text(encoding="utf-8").split()[0])


@dataclass
class Burst:
    count: int
    settings: dict[str, str] = field(default_factory=dict)
    attempts: list[int] = field(default_factory=list)  # calls each ready workspace needed
    ready_at: list[float] = field(default_factory=list)  # seconds from the burst to ready
    retry_after: list[float] = field(default_factory=list)  # every Retry-After received
    refusals: Counter[str] = field(default_factory=Counter)  # 503s by code
    errors: Counter[str] = field(default_factory=Counter)  # anything else, and workspaces never ready
    loads: list[float] = field(default_factory=list)
    seconds: float = 0.0
    metrics: str = ""  # the gateway's /metrics page once every workspace was ready

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def row(self) -> dict[str, str]:
        first = sum(1 for a in self.attempts if a == 1)
        second = sum(1 for a in self.attempts if a == 2)
        later = len(self.attempts) - first - second
        ready = f"{max(self.ready_at):.0f}" if len(self.ready_at) == self.count else "never"
        waits = sorted(self.retry_after)
        loads = self.loads or [float("nan")]
        starts = metric(self.metrics, "almanac_engine_cold_starts_total")
        mean = metric(self.metrics, "almanac_engine_start_seconds_sum") / max(1.0, starts)
        return {
            "cold workspaces at once": str(self.count),
            "ready at the first call": str(first),
            "after one honoured Retry-After": str(second),
            "after more": str(later),
            "never": str(self.count - len(self.attempts)),
            "all ready after s": ready,
            "Retry-After min / max s": f"{waits[0]:g} / {waits[-1]:g}" if waits else "—",
            "503s by code": ", ".join(f"{k}: {n}" for k, n in sorted(self.refusals.items())) or "none",
            "other errors": ", ".join(f"{k}: {n}" for k, n in sorted(self.errors.items())) or "none",
            "/metrics: engine starts / crashes / 503s": (
                f"{starts:.0f} / {metric(self.metrics, 'almanac_engine_crashes_total'):.0f}"
                f" / {metric(self.metrics, 'almanac_unavailable_total'):.0f}"
            ),
            "mean start s": f"{mean:.1f}",
            "load average start / max / end": f"{loads[0]:.1f} / {max(loads):.1f} / {loads[-1]:.1f}",
        }


async def burst(root: Path, count: int, *, settings: dict[str, str] | None = None) -> Burst:
    out = Burst(count, settings or {})
    gw = GatewayRun(root, {**default_settings(), **out.settings})
    tokens = gw.seed(count, "cold")
    gw.start()
    done = anyio.Event()

    async def sample_load() -> None:
        while not done.is_set():
            out.loads.append(load_average())
            with anyio.move_on_after(1.0):
                await done.wait()

    async def one(http: httpx2.AsyncClient, token: str, began: float) -> None:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        attempt = 0
        while time.monotonic() - began < GIVE_UP_SECONDS:
            attempt += 1
            try:
                response = await http.post(gw.url + "/mcp", json=INITIALIZE, headers=headers)
            except httpx2.TransportError as exc:
                out.errors[error_kind(exc)] += 1
                return
            if response.status_code == 200:
                out.ready_at.append(time.monotonic() - began)
                out.attempts.append(attempt)
                break
            if response.status_code != 503:
                out.errors[f"http {response.status_code}"] += 1
                return
            out.refusals[response.json().get("error", {}).get("code", "?")] += 1
            wait = float(response.headers["retry-after"])
            out.retry_after.append(wait)
            await anyio.sleep(wait)
        else:
            out.errors["not ready in time"] += 1
            return
        try:
            async with gw.connect(token) as client:
                result = await client.call_tool("remember", {"statement": "a cold start wrote this"})
            if result.is_error:
                out.errors["remember refused"] += 1
        except Exception as exc:
            out.errors[f"remember: {error_kind(exc)}"] += 1

    try:
        timeout = httpx2.Timeout(60.0, read=None)
        async with httpx2.AsyncClient(timeout=timeout) as http, anyio.create_task_group() as tg:
            tg.start_soon(sample_load)
            began = time.monotonic()
            async with anyio.create_task_group() as calls:
                for token in tokens:
                    calls.start_soon(one, http, token, began)
            out.seconds = time.monotonic() - began
            done.set()
        out.metrics = gw.metrics()
    finally:
        if gw.stop() != 0:
            out.errors["gateway exit status"] += 1
    return out
