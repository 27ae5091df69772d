"""Gateway benchmarks (``perf:gateway``, ``perf:cold-start``, ``perf:memory``).

    python -m bench.gateway [--calls 200] [--workspaces 20] [--cold 5] [--out docs/benchmarks.md]
    python -m bench.gateway --latency-only [--calls 200]      only item 1, printed (nothing written)
    python -m bench.gateway --engine-cpu [--calls 200]        only the engine's CPU and wake-ups
                                                              per call over its socket (embedding
                                                              off), by thread, printed
    python -m bench.gateway --gateway-cpu [--calls 200]       only the gateway process's own CPU and
                                                              wake-ups per proxied call (its engine
                                                              excluded), printed

In one run, against a real ``almanac serve`` (port 0) and real engines:

1. p50/p95 of ``get_context`` and ``remember`` three ways, interleaved call by call: in-process
   (``Memory.remember`` / ``Recall.get_context`` in this process, no transport), straight to an
   engine's socket and through the gateway (same MCP client, 2026-07-28 protocol; all three share
   the gateway's embedder). Socket overhead = socket − in-process; gateway overhead = gateway −
   socket (p50s of the same run). Then the same with the lean client (``bench/lean.py``), and
   in-process against the engine's socket through the gateway's own engine client
   (``gateway/engines/wire.py``, the socket's only production caller);
2. the cold start of a sleeping workspace: the gateway is restarted over the same data, so every
   engine sleeps, and the first call of each seeded workspace is timed (client connect included);
3. RSS of an idle engine with and without the shared embedder, and of N running workspaces.

Prints a Markdown table and writes it into ``docs/benchmarks.md`` under its own heading (other
sections of that file are left alone).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench.lean import Call, lean_client, wire_client
from bench.processes import (
    MB,
    Served,
    background_cpu,
    client_for,
    cpu_seconds,
    engine_children,
    metric_mean,
    percentile,
    pss_bytes,
    seed_owners,
    serve,
    settled_rss,
    stop,
    switches,
    wait_engine,
    wait_for_spare,
    wait_until,
)
from bench.sections import replace_section
from gateway import layout
from gateway.engines.procs import rss_bytes

HEADING = "## Gateway (`bench/gateway.py`)"
SHARED = ("embedder", "spare")  # the gateway's children that serve no one workspace


@dataclass
class Latency:
    remember: list[float]
    context: list[float]
    context_error: str | None
    #: CPU milliseconds per call of each tool, where the bench could count them (see :func:`compare`).
    remember_cpu: float | None = None
    context_cpu: float | None = None
    #: The calling side's own CPU milliseconds per call (this process's main thread around each
    #: call, where the client runs): for a way over a socket, the client's cost, not the server's.
    remember_client_cpu: float | None = None
    context_client_cpu: float | None = None


def over_mcp(client: Client) -> Call:
    async def call(tool: str, arguments: dict[str, Any]) -> str | None:
        result = await client.call_tool(tool, arguments)
        return " ".join(getattr(c, "text", "") for c in result.content)[:80] if result.is_error else None

    return call


@asynccontextmanager
async def in_process(root: Path, embedder_socket: Path) -> AsyncIterator[Call]:
    """The engine's own work with no transport: ``Memory.remember`` and ``Recall.get_context`` on a
    workspace of this process (its index embedded by the same shared embedder), built as the engine
    builds them — with the ageing lifecycle the engine gives both (a save tells it; a read ranks by
    decay, then records its citations and the retrieval log), so the transport's rows compare the
    same work."""
    # Imported here: the rest of this bench (and the tests that use it) need no engine.
    from engine import settings as engine_settings
    from engine.ageing.lifecycle import Lifecycle
    from engine.embed.remote import RemoteEmbedder
    from engine.index.indexer import Indexer
    from engine.memory import Memory
    from engine.recall.context import Recall
    from engine.scope import Caller
    from engine.server import recall_settings
    from engine.store.model import utc_now
    from engine.store.workspace import Workspace

    root.mkdir()
    workspace = Workspace(root)
    workspace.open()
    embedder = RemoteEmbedder(str(embedder_socket))
    indexer = Indexer(workspace, embedder, scan_interval_s=None)
    indexer.start()
    loaded = engine_settings.load(None, workspace.root, None)
    ageing = Lifecycle(workspace, loaded.settings, utc_now)
    ageing.start()
    memory = Memory(workspace, utc_now, on_save=ageing.saved)
    recall = Recall(indexer, recall_settings(loaded.settings), ageing, loaded)
    caller = Caller(client_name="bench")

    async def call(tool: str, arguments: dict[str, Any]) -> str | None:
        if tool == "remember":
            memory.remember(caller, arguments["statement"])
        else:
            recall.get_context(caller, arguments["query"])
        return None

    try:
        yield call
    finally:
        ageing.stop()
        indexer.stop()
        embedder.close()
        workspace.close()


def _call_of(tool: str, way: str, i: int) -> tuple[str, dict[str, Any]]:
    if tool == "remember":
        return "remember", {"statement": f"{way} note {i}: the fjord deploy is blue"}
    return "get_context", {"query": f"fjord deploy {i % 7}"}


async def compare(
    calls_by_way: dict[str, Call],
    calls: int,
    cpu: dict[str, Callable[[], float]] | None = None,
    run: str = "",
) -> dict[str, Latency]:
    """Time the same calls each way, interleaved (so background work such as embedding weighs on
    all alike), after a warm-up.

    ``cpu`` (optional, per way) reads a CPU-seconds counter of the processes that serve only that
    way; read before and after each tool's timed calls, it gives CPU per call, which a busy host
    inflates far less than wall time. The one way without a counter (the in-process one) is
    counted by the main thread's CPU around each of its calls plus everything this process's other
    threads (its indexer) used meanwhile. A counter named after no way (the gateway process alone,
    say) is read the same way and comes back as a :class:`Latency` with no samples. ``run`` names
    this run in what is remembered (a second run writing the same statements would time the
    engine's duplicate check, not a write)."""
    counters = dict(cpu or {})
    names = [*calls_by_way, *(name for name in counters if name not in calls_by_way)]
    samples: dict[str, dict[str, list[float]]] = {n: {"remember": [], "context": []} for n in names}
    used: dict[str, dict[str, float]] = {name: {"remember": 0.0, "context": 0.0} for name in names}
    client: dict[str, dict[str, float]] = {name: {"remember": 0.0, "context": 0.0} for name in names}
    errors: dict[str, str] = {}
    local = [name for name in calls_by_way if name not in counters]
    if len(local) == 1:
        counters[local[0]] = background_cpu  # plus its main-thread time, added call by call below
    for tool in ("remember", "context"):
        started: dict[str, float] = {}
        for i in range(-5, calls):
            if i == 0:
                started = {name: read() for name, read in counters.items()}
            for name, call in sorted(calls_by_way.items(), reverse=i % 2 == 0):
                began, began_cpu = time.perf_counter(), time.thread_time()
                error = await call(*_call_of(tool, f"{run} {name}".strip(), i))
                elapsed = (time.perf_counter() - began) * 1000
                if error is not None and tool == "remember":
                    raise RuntimeError(f"remember failed: {error}")
                if error is not None:
                    errors.setdefault(name, error)
                if i >= 0:
                    samples[name][tool].append(elapsed)
                    spent = time.thread_time() - began_cpu
                    client[name][tool] += spent
                    used[name][tool] += spent if name in local else 0.0
        for name, before in started.items():
            used[name][tool] += counters[name]() - before
    per_call = {name: {t: v * 1000 / max(1, calls) for t, v in found.items()} for name, found in used.items()}
    own = {name: {t: v * 1000 / max(1, calls) for t, v in found.items()} for name, found in client.items()}
    return {
        name: Latency(
            found["remember"],
            found["context"],
            errors.get(name),
            per_call[name]["remember"],
            per_call[name]["context"],
            own[name]["remember"] if name not in local else None,
            own[name]["context"] if name not in local else None,
        )
        for name, found in samples.items()
    }


async def idle_engine_rss(root: Path, embedder_socket: Path | None) -> int:
    """Start an engine the way the gateway does, use it once, and measure it idle."""
    name = "with" if embedder_socket else "without"
    sock, workspace = root / f"rss-{name}.sock", root / f"rss-{name}"
    argv = [sys.executable, "-m", "engine", "--socket", str(sock), "--dir", str(workspace)]
    if embedder_socket:
        argv += ["--embedder-socket", str(embedder_socket)]
    workspace.mkdir(parents=True)
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        wait_engine(sock)
        async with client_for("http://localhost/mcp", uds=str(sock)) as client:
            await client.call_tool("remember", {"statement": "the fjord deploy uses blue-green"})
            await client.call_tool("get_context", {"query": "fjord deploy"})
        return settled_rss(proc.pid)
    finally:
        stop(proc)


async def three_ways(
    root: Path, gw: Served, token: str, embedder_socket: Path, calls: int
) -> dict[str, dict[str, Latency]]:
    """Item 1: the same calls in-process, straight to an engine's socket and through the gateway —
    twice: with the ``mcp`` client (what an agent sees) and with the lean client (the transports'
    own cost, no client-side validation), each run against the in-process calls of its own run."""
    direct_sock, direct_dir = root / "direct.sock", root / "direct"
    direct_dir.mkdir()
    direct = subprocess.Popen(
        [sys.executable, "-m", "engine", "--socket", str(direct_sock), "--dir", str(direct_dir),
         "--embedder-socket", str(embedder_socket)],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    measured: dict[str, dict[str, Latency]] = {}
    try:
        wait_engine(direct_sock)

        def gateway_cpu() -> float:  # the gateway and the engine it runs for this workspace
            engines = [pid for role, pid in engine_children(gw.proc.pid).items() if role not in SHARED]
            return cpu_seconds(gw.proc.pid) + sum(cpu_seconds(pid) for pid in engines)

        counters = {
            "engine": lambda: cpu_seconds(direct.pid),
            "gateway": gateway_cpu,
            GATEWAY_ALONE: lambda: cpu_seconds(gw.proc.pid),
        }
        async with in_process(root / "in-process", embedder_socket) as local:
            async with (
                client_for(gw.url + "/mcp", token=token) as through,
                client_for("http://localhost/mcp", uds=str(direct_sock)) as straight_client,
            ):
                ways = {"gateway": over_mcp(through), "engine": over_mcp(straight_client), "local": local}
                measured["mcp"] = await compare(ways, calls, counters, run="mcp")
            async with (
                lean_client(gw.url + "/mcp", token=token) as lean_through,
                lean_client("http://localhost/mcp", uds=str(direct_sock)) as lean_straight,
            ):
                ways = {"gateway": lean_through, "engine": lean_straight, "local": local}
                measured["lean"] = await compare(ways, calls, counters, run="lean")
            async with wire_client(str(direct_sock)) as wire_straight:
                ways = {"engine": wire_straight, "local": local}
                engine_only = {"engine": counters["engine"]}
                measured["wire"] = await compare(ways, calls, engine_only, run="wire")
        return measured
    finally:
        stop(direct)


async def run_latency(calls: int) -> dict[str, str]:
    """Only the three-way latency rows (a quick answer while tuning a transport)."""
    root = Path(tempfile.mkdtemp(prefix="alm-bench-"))
    data_dir, log = root / "data", root / "gateway.log"
    (latency_token,) = seed_owners(data_dir, 1, "latency")
    embedder_socket = layout.runtime_dir(data_dir.resolve(), None) / "embedder.sock"
    gw = serve(data_dir, log)
    try:
        wait_until(embedder_socket.exists, 60, "the embedder")
        measured = await three_ways(root, gw, latency_token, embedder_socket, calls)
    finally:
        stop(gw.proc)
    return latency_rows(measured)


@dataclass(frozen=True)
class Spent:
    """What one process spent per call over a run of calls."""

    loop_ms: float  #: CPU of its main thread (the event loop)
    all_ms: float  #: CPU of the whole process
    loop_switches: float  #: wake-ups of its main thread (:func:`switches`)
    all_switches: float  #: wake-ups of all its threads
    others: tuple[float, ...]  #: each other thread's wake-ups (those that had any), most first


async def spent(pid: int, call: Call, tool: str, calls: int, way: str) -> Spent:
    """``calls`` calls of ``tool`` through ``call``, and what process ``pid`` spent on each."""
    loop_before, all_before, switched = cpu_seconds(pid, pid), cpu_seconds(pid), switches(pid)
    for i in range(calls):
        error = await call(*_call_of(tool, way, i))
        if error is not None:
            raise RuntimeError(f"{tool} failed: {error}")
    loop_ms = (cpu_seconds(pid, pid) - loop_before) * 1000 / calls
    all_ms = (cpu_seconds(pid) - all_before) * 1000 / calls
    after = switches(pid)
    per_thread = {tid: (n - switched.get(tid, 0)) / calls for tid, n in after.items()}
    others = sorted((n for tid, n in per_thread.items() if tid != pid and n > 0), reverse=True)
    return Spent(loop_ms, all_ms, per_thread.get(pid, 0.0), sum(per_thread.values()), tuple(others))


def spent_rows(what: str, name: str, found: Spent) -> dict[str, str]:
    others = ", ".join(f"{n:.2f}" for n in found.others) or "none"
    return {
        f"`{name}` {what} CPU per call: event-loop thread / whole process (ms)": (
            f"{found.loop_ms:.2f} / {found.all_ms:.2f}"
        ),
        f"`{name}` {what} wake-ups per call (voluntary context switches): event-loop thread / "
        "whole process": f"{found.loop_switches:.2f} / {found.all_switches:.2f}",
        f"`{name}` {what} wake-ups per call of each other thread woken": others,
    }


async def run_engine_cpu(calls: int) -> dict[str, str]:
    """CPU and wake-ups per call of one engine over its socket, embedding off (so nothing
    runs in the background but what a call wakes), called through the gateway's own engine client
    (``bench.lean.wire_client``): its event-loop thread (transport, SDK, dispatch), the whole
    process, and each other thread a call wakes (tool thread, indexer, ageing sweep)."""
    root = Path(tempfile.mkdtemp(prefix="alm-bench-"))
    sock, workspace = root / "engine.sock", root / "ws"
    workspace.mkdir()
    argv = [sys.executable, "-m", "engine", "--socket", str(sock), "--dir", str(workspace)]
    proc = subprocess.Popen([*argv, "--embedding-provider", "off"], stderr=subprocess.DEVNULL)
    rows: dict[str, str] = {}
    try:
        wait_engine(sock)
        async with wire_client(str(sock)) as call:
            for i in range(30):
                await call(*_call_of("remember", "warm", i))
            for tool, name in (("remember", "remember"), ("context", "get_context")):
                rows |= spent_rows("engine", name, await spent(proc.pid, call, tool, calls, "engine"))
    finally:
        stop(proc)
    return rows


async def run_gateway_cpu(calls: int) -> dict[str, str]:
    """The gateway process's own CPU and wake-ups per call it proxies (its engine, the
    embedder and the client excluded), the lean client posting ``/mcp`` calls through it."""
    root = Path(tempfile.mkdtemp(prefix="alm-bench-"))
    data_dir, log = root / "data", root / "gateway.log"
    (token,) = seed_owners(data_dir, 1, "gateway-cpu")
    gw = serve(data_dir, log)
    rows: dict[str, str] = {}
    try:
        async with lean_client(gw.url + "/mcp", token=token) as call:
            for i in range(30):
                await call(*_call_of("remember", "warm", i))
            for tool, name in (("remember", "remember"), ("context", "get_context")):
                found = await spent(gw.proc.pid, call, tool, calls, "gateway")
                rows |= spent_rows("gateway process alone, lean client,", name, found)
    finally:
        stop(gw.proc)
    return rows


LONG_NOTES = 96
_WORDS = [
    "deploy",
    "fjord",
    "rollback",
    "budget",
    "review",
    "meeting",
    "agent",
    "decision",
    "schema",
    "migration",
    "cache",
    "latency",
    "owner",
    "token",
    "index",
    "vector",
    "backup",
    "volume",
    "cluster",
    "node",
    "placement",
    "lease",
    "quota",
    "invoice",
    "design",
    "release",
    "incident",
    "postmortem",
    "customer",
    "roadmap",
    "hiring",
    "onboarding",
    "metrics",
    "dashboard",
    "alert",
]


def long_note(i: int) -> str:
    """A note of 120–300 words (deterministic): what an agent's meeting summary looks like in size."""
    rng = random.Random(i)
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(120, 300))) + f" (note {i})"


async def index_long_notes(url: str, token: str, count: int) -> None:
    """One workspace writes ``count`` long notes and waits until every one is embedded, so the host
    embedder's memory is measured after real document batches, not only one-line statements."""
    async with client_for(url + "/mcp", token=token) as client:
        for i in range(count):
            await client.call_tool("remember_note", {"text": long_note(i)})
        deadline = time.monotonic() + 600
        while True:
            status = await client.call_tool("memory_status", {})
            waiting = (status.structured_content or {}).get("index", {}).get("waiting_for_embeddings")
            if waiting == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{waiting} items still waiting for embeddings after 600 s")
            await anyio.sleep(0.5)


async def run(calls: int, workspaces: int, cold: int, long_notes: int = LONG_NOTES) -> dict[str, str]:
    root = Path(tempfile.mkdtemp(prefix="alm-bench-"))
    data_dir, log = root / "data", root / "gateway.log"
    (latency_token,) = seed_owners(data_dir, 1, "latency")
    many = seed_owners(data_dir, workspaces, "ws")
    sleepers = seed_owners(data_dir, cold, "cold")
    embedder_socket = layout.runtime_dir(data_dir.resolve(), None) / "embedder.sock"

    gw = serve(data_dir, log)
    try:
        wait_until(embedder_socket.exists, 60, "the embedder")
        measured = await three_ways(root, gw, latency_token, embedder_socket, calls)
        idle_with = await idle_engine_rss(root, embedder_socket)
        idle_without = await idle_engine_rss(root, None)
        for token in [*many, *sleepers]:
            async with client_for(gw.url + "/mcp", token=token) as client:
                await client.call_tool("remember", {"statement": "seed: the fjord deploy uses blue-green"})
        await index_long_notes(gw.url, next(iter(many)), long_notes)
        procs = engine_children(gw.proc.pid)
        engine_rss = [
            settled_rss(pid, 5.0) for role, pid in procs.items() if Path(role).name in many.values()
        ]
        embedder_rss = (rss_bytes(procs["embedder"]) or 0) if "embedder" in procs else 0
        gateway_rss = rss_bytes(gw.proc.pid) or 0
        # the gateway, the embedder, the spare and the measured engines — not the engines of the
        # workspaces seeded to be woken cold later (they run too, but are not among the n)
        counted = [gw.proc.pid, *(pid for role, pid in procs.items() if role in ("embedder", "spare"))]
        counted += [pid for role, pid in procs.items() if Path(role).name in many.values()]
        host_pss = sum(pss_bytes(pid) for pid in counted)
        engine_pss = [pss_bytes(pid) for role, pid in procs.items() if Path(role).name in many.values()]
    finally:
        stop(gw.proc)

    gw = serve(data_dir, log)  # every engine sleeps now
    try:
        cold_ms = []
        for token in sleepers:
            wait_for_spare(gw.proc.pid)  # a sleeping workspace on a settled host: a warm spare waits
            began = time.perf_counter()
            async with client_for(gw.url + "/mcp", token=token) as client:
                result = await client.call_tool("retrieve_memory", {"subject": "fjord"})
                cold_ms.append((time.perf_counter() - began) * 1000)
                if result.is_error:
                    raise RuntimeError(f"cold call failed: {result.content}")
        engine_start_ms = metric_mean(gw.url, "almanac_engine_start_seconds") * 1000
    finally:
        stop(gw.proc)
    figures = (measured, cold_ms, engine_start_ms, engine_rss, embedder_rss, gateway_rss)
    return report(Measured(*figures, idle_with, idle_without, engine_pss, host_pss, long_notes))


@dataclass(frozen=True)
class Measured:
    #: by client (``mcp``, ``lean``), then by way (``local``, ``engine``, ``gateway``)
    latency: dict[str, dict[str, Latency]]
    cold_ms: list[float]
    engine_start_ms: float
    engine_rss: list[int]
    embedder_rss: int
    gateway_rss: int
    idle_with: int
    idle_without: int
    engine_pss: list[int]
    host_pss: int
    long_notes: int = LONG_NOTES


#: How each client's rows are named (``docs/benchmarks.md`` says what each row means).
CLIENTS = {"mcp": "mcp client", "lean": "lean client", "wire": "gateway's engine client"}
#: The counter (and :class:`Latency` without samples) of the gateway process alone, engine excluded.
GATEWAY_ALONE = "gateway process"


def latency_rows(measured: dict[str, dict[str, Latency]]) -> dict[str, str]:
    """The latency rows: for each client, each tool's p50/p95 three ways and the two overheads
    (socket − in-process and gateway − socket, p50s of that client's own run)."""

    def pq(samples: list[float]) -> str:
        return f"{statistics.median(samples):.2f} / {percentile(samples, 0.95):.2f}"

    rows: dict[str, str] = {}
    for client, ways in measured.items():
        via_gateway, straight, local = ways.get("gateway"), ways["engine"], ways["local"]
        alone = ways.get(GATEWAY_ALONE)
        who = CLIENTS.get(client, client)
        for name, attr in (("remember", "remember"), ("get_context", "context")):
            eng_s, local_s = (getattr(x, attr) for x in (straight, local))
            rows[f"`{name}` p50 / p95 in-process, no transport, beside the {who} calls (ms)"] = pq(local_s)
            rows[f"`{name}` p50 / p95 straight to the engine socket, {who} (ms)"] = pq(eng_s)
            if via_gateway is not None:
                gw_s = getattr(via_gateway, attr)
                note = ""
                if attr == "context" and via_gateway.context_error:
                    note = f" (tool error: {via_gateway.context_error})"
                rows[f"`{name}` p50 / p95 through the gateway, {who} (ms)"] = pq(gw_s) + note
            socket_cost = statistics.median(eng_s) - statistics.median(local_s)
            rows[f"`{name}` engine socket overhead at p50, {who} (ms; target ≤ 2)"] = f"{socket_cost:.2f}"
            client_cpu = getattr(straight, attr + "_client_cpu")
            if client_cpu is not None:
                rows[f"`{name}` of which the {who}'s own CPU per call, straight to the socket (ms)"] = (
                    f"{client_cpu:.2f}"
                )
            if via_gateway is not None:
                overhead = statistics.median(getattr(via_gateway, attr)) - statistics.median(eng_s)
                rows[f"`{name}` gateway overhead at p50, {who} (ms; target ≤ 3)"] = f"{overhead:.2f}"
            ways_cpu = [local, straight] if via_gateway is None else [local, straight, via_gateway]
            cpus = [getattr(x, attr + "_cpu") for x in ways_cpu]
            if all(c is not None for c in cpus):
                served = "" if via_gateway is None else " / gateway + its engine"
                label = f"`{name}` CPU per call, {who}: in-process / engine over its socket{served} (ms)"
                rows[label] = " / ".join(f"{c:.2f}" for c in cpus)
            own = getattr(alone, attr + "_cpu") if alone is not None else None
            if own is not None:
                rows[f"`{name}` the gateway process's own CPU per call, {who}, its engine excluded (ms)"] = (
                    f"{own:.2f}"
                )
    return rows


def report(m: Measured) -> dict[str, str]:
    """The table rows (metric → value), in order."""
    rows = latency_rows(m.latency)
    rows[f"cold start of a sleeping workspace, p50 / max of {len(m.cold_ms)} (ms; target ≤ 1000)"] = (
        f"{statistics.median(m.cold_ms):.0f} / {max(m.cold_ms):.0f}"
    )
    rows["of which: a warm engine (forked from the template, else the spare) → healthy, mean (ms)"] = (
        f"{m.engine_start_ms:.0f}"
    )
    rows["idle engine RSS, with the shared embedder (MB)"] = f"{m.idle_with / MB:.1f}"
    rows["idle engine RSS, without it: model in the engine (MB)"] = f"{m.idle_without / MB:.1f}"
    n, total = len(m.engine_rss), sum(m.engine_rss)
    rows[f"{n} running workspaces: engines' RSS, total / mean (MB)"] = (
        f"{total / MB:.0f} / {total / n / MB:.1f}"
    )
    rows[f"gateway + embedder RSS, the embedder after {m.long_notes} long notes (MB)"] = (
        f"{m.gateway_rss / MB:.0f} + {m.embedder_rss / MB:.0f}"
    )
    projected = m.gateway_rss + m.embedder_rss + 50 * (total / n)
    rows["projected host RSS for 50 workspaces (MB; target ≤ 4096)"] = f"{projected / MB:.0f}"
    pss_mean = sum(m.engine_pss) / max(1, len(m.engine_pss))
    rows[f"running engine, memory really used, PSS mean of {n} (MB; target ≤ 80)"] = f"{pss_mean / MB:.1f}"
    rows[f"{n} running workspaces + template + gateway + embedder: memory really used, PSS (MB)"] = (
        f"{m.host_pss / MB:.0f}"
    )
    projected_pss = m.host_pss + (50 - len(m.engine_pss)) * pss_mean
    rows["projected host memory for 50 workspaces by PSS (MB; target ≤ 4096)"] = f"{projected_pss / MB:.0f}"
    return rows


_TARGET = re.compile(r"target ≤ ([0-9.]+)")


def met(metric: str, value: str) -> str:
    """``yes`` / ``no`` for a row whose label names a target (``target ≤ N``): its first figure
    against N; empty for a row without one. A negative overhead is no reading: the host's noise
    between the two runs it subtracts was larger than the overhead itself."""
    target, figure = _TARGET.search(metric), re.match(r"\s*(-?[0-9.]+)", value)
    if target is None or figure is None:
        return ""
    if float(figure.group(1)) < 0:
        return "no reading (below zero: noise)"
    return "yes" if float(figure.group(1)) <= float(target.group(1)) else "no"


def table(rows: dict[str, str], calls: int) -> str:
    lines = [
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPUs (load average "
        f"{os.getloadavg()[0]:.1f} when it finished), {calls} calls per figure, loopback HTTP, "
        "MCP 2026-07-28 protocol; `python -m bench.gateway` to repeat. Figures before and after "
        "each change to these costs: `docs/perf-journal/2026-12-01-gateway-costs.md`.",
        "",
        "The latency rows come from two runs, each interleaving the same calls three ways (in-process: "
        "the engine's `Memory.remember` / `Recall.get_context` in the bench's process, built as the "
        "engine builds them (with its ageing lifecycle: decay in ranking, citations and the retrieval "
        "log after a read), no transport; "
        "straight to an engine's Unix socket; through the gateway over loopback HTTP). The *mcp client* "
        "rows call through the `mcp` package's client, as an agent does: they include its own cost "
        "(pydantic models, a `jsonschema` check of each result against the tool's output schema). The "
        "*lean client* rows post the same `tools/call` bytes and MCP headers with plain httpx and read "
        "only `isError` (`bench/lean.py`): they show what the transports themselves add. The "
        "*gateway's engine client* rows (a third run, engine socket only) send those bytes the way "
        "the socket's only production caller does: through the gateway's own engine transport "
        "(`gateway/engines/wire.py`), as its `/mcp` proxy hands it each request and reads each "
        "reply (the bench only decodes the reply to check `isError`). Socket "
        "overhead = socket p50 − in-process p50; gateway overhead = gateway p50 − socket p50, both "
        "within one run. CPU per call counts the serving processes only (the engine; the gateway and "
        "its engine; for in-process, the bench's own threads), never the client; the gateway "
        "process's own row counts the gateway alone, its engine and embedder excluded. Socket overhead "
        "is measured at the caller, so it holds the caller's own work too: the *of which the client's "
        "own CPU* rows count it (the bench's main thread around each call straight to the socket, "
        "where the client runs; the in-process side has no client). With the gateway's engine "
        "client — the socket's one production caller — what is left is the socket's own overhead.",
        "",
        "| metric | value | met? |",
        "|---|---|---|",
        *(f"| {k} | {v} | {met(k, v)} |" for k, v in rows.items()),
        "",
    ]
    return "\n".join(lines)


START, END = "<!-- gateway-bench:start -->", "<!-- gateway-bench:end -->"


def write_section(path: Path, section: str) -> None:
    """Replace this benchmark's section of ``path`` (or append it), leaving the others alone; without
    its markers, the section runs from its heading to the next heading or marker comment."""
    replace_section(path, START, END, section, heading=HEADING)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per latency figure")
    parser.add_argument("--workspaces", type=int, default=20, help="workspaces running at once for RSS")
    parser.add_argument("--cold", type=int, default=5, help="sleeping workspaces to wake")
    parser.add_argument(
        "--long-notes", type=int, default=LONG_NOTES, help="long notes indexed before memory is read"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("docs/benchmarks.md"), help="Markdown file to update"
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--latency-only", action="store_true", help="only the three-way latency rows, printed (not written)"
    )
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="write the table into --out (the default for a full run; --no-write prints only)",
    )
    parser.add_argument(
        "--engine-cpu",
        action="store_true",
        help="only one engine's CPU and wake-ups per call over its socket, printed",
    )
    parser.add_argument(
        "--gateway-cpu",
        action="store_true",
        help="only the gateway process's own CPU and wake-ups per proxied call, printed",
    )
    args = parser.parse_args(argv)
    if args.write_docs and args.no_write:
        parser.error("--write-docs and --no-write contradict each other")
    if args.engine_cpu:
        print(table(anyio.run(run_engine_cpu, args.calls), args.calls))
        return 0
    if args.gateway_cpu:
        print(table(anyio.run(run_gateway_cpu, args.calls), args.calls))
        return 0
    if args.latency_only:
        print(table(anyio.run(run_latency, args.calls), args.calls))
        return 0
    rows = anyio.run(run, args.calls, args.workspaces, args.cold, args.long_notes)
    section = table(rows, args.calls)
    print(section)
    if not args.no_write:
        write_section(args.out, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
