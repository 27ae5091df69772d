"""How many workspaces one node serves, 10 % of them active at p99 ≤ 100 ms (``rel:load``, ``perf:memory``).

    python -m bench.load --node                               steps of 20, 40, 80, 160, 320 workspaces
    python -m bench.load --node --node-steps 10,20,40 --seconds 8 --pace 0.5

At each step W one ``almanac serve`` (the shared embedder on) holds W workspaces, each with its
owner and token. A tenth of them (at least one) are active: one real ``mcp`` client each, calling
the mixed stream of ``bench.load`` one call at a time, ``--pace`` seconds apart (an agent's pace;
0: back to back); the others are registered and asleep (no engine runs for them). The step reports
calls/s and p50 / p99 of the active calls, each running engine's RSS, PSS and open descriptors,
the gateway's descriptors, server CPU per call (gateway, engines, embedder) and the host's load.
Every acknowledged write is read back. The search stops at the first step over p99 100 ms.

What bounds a node is then worked out from those figures, for this host and for a 24 GB node with
the same cores: CPU is the largest step measured to hold p99 ≤ 100 ms; memory and descriptors are
extrapolated from the per-engine figures (labelled so): an active workspace holds one running
engine, a sleeping one holds nothing.
"""

from __future__ import annotations

import math
import os
import random
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.crowd import DEFAULT_LIMIT, Backoff, Outcome, Row, measure, read_back, seed, seed_tokens
from bench.processes import engine_children, pss_bytes
from bench.reliability.procs import GatewayRun
from gateway.engines.procs import rss_bytes

#: The share of a node's workspaces active at once, and the latency they are held to.
ACTIVE_SHARE = 0.10
P99_MS = 100.0
STEPS = (20, 40, 80, 160, 320)
NODE_GB = 24.0


@dataclass(frozen=True)
class Step:
    workspaces: int
    active: int
    calls_per_s: float
    p50: float
    p99: float
    rss_mb: float  # mean RSS of a running engine
    fds: float  # mean open descriptors of a running engine
    gateway_fds: int
    gateway_rss_mb: float
    embedder_rss_mb: float
    cpu_ms: float  # server CPU per call: gateway + engines + embedder
    load: float
    problems: int  # writes not read back, a gateway that did not stop cleanly
    errors: int
    #: mean PSS of a running engine (its private pages and a fair share of those it shares: an
    #: engine forked from the template shares most of its pages), and the PSS of the gateway, the
    #: embedder and the template together; 0 where the host does not report PSS
    pss_mb: float = 0.0
    shared_pss_mb: float = 0.0

    @property
    def held(self) -> bool:
        return self.p99 <= P99_MS and not self.problems and not self.errors


def _share() -> str:
    return f"{ACTIVE_SHARE * 100:g} %"


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


async def run_step(root: Path, workspaces: int, seconds: float, pace: float, rng: random.Random) -> Step:
    active = max(1, math.ceil(workspaces * ACTIVE_SHARE))
    settings = {"embedder": "true", "engine_start_timeout": "60", "max_engines": str(max(200, workspaces))}
    run = GatewayRun(root, settings)
    spaces = seed_tokens(run, Row(workspaces, workspaces, "mixed"), "node")
    busy = spaces[:active]
    row = Row(active, active, "mixed")
    out = Outcome(row, seconds)
    backoff = Backoff.of(DEFAULT_LIMIT)
    run.start()
    try:
        await seed(run, busy, backoff)
        await measure(run, row, busy, seconds, rng, out, backoff, pace=pace, sleeping=False)
        assert run.served is not None
        gateway = run.served.proc.pid
        children = engine_children(gateway)
        engines = [pid for role, pid in children.items() if role not in ("embedder", "spare")]
        rss = [rss_bytes(pid) or 0 for pid in engines]
        pss = [pss_bytes(pid) for pid in engines]
        shared = [gateway, *(pid for role, pid in children.items() if role in ("embedder", "spare"))]
        shared_pss = sum(pss_bytes(pid) for pid in shared)
        held = [fds(pid) for pid in engines]
        gateway_fds, gateway_rss = fds(gateway), rss_bytes(gateway) or 0
        embedder_rss = (rss_bytes(children["embedder"]) or 0) if "embedder" in children else 0
        await read_back(run, busy, out)
    finally:
        if run.stop() != 0:
            out.problems.append("the gateway did not exit 0 on SIGTERM")
    calls = out.calls
    return Step(
        workspaces=workspaces,
        active=active,
        calls_per_s=calls / seconds,
        p50=out.p(0.5),
        p99=out.p(0.99),
        rss_mb=statistics.mean(rss) / 2**20 if rss else 0.0,
        fds=statistics.mean(held) if held else 0.0,
        gateway_fds=gateway_fds,
        gateway_rss_mb=gateway_rss / 2**20,
        embedder_rss_mb=embedder_rss / 2**20,
        cpu_ms=1000 * sum(out.cpu.get(k, 0.0) for k in ("gateway", "engines", "embedder")) / max(calls, 1),
        load=os.getloadavg()[0],
        problems=len(out.problems),
        errors=sum(out.errors.values()),
        pss_mb=statistics.mean(pss) / 2**20 if pss else 0.0,
        shared_pss_mb=shared_pss / 2**20,
    )


async def search(steps: list[int], seconds: float, pace: float, seed_: int) -> list[Step]:
    """Each step in turn, up to the first that does not hold p99 ≤ 100 ms (printed as it goes)."""
    rng = random.Random(seed_)
    root = Path(tempfile.mkdtemp(prefix="alm-node-"))
    done: list[Step] = []
    print(HEAD, flush=True)
    for i, workspaces in enumerate(steps):
        step = await run_step(root / f"step{i}", workspaces, seconds, pace, rng)
        print(line(step), flush=True)
        done.append(step)
        if not step.held:
            break
    return done


HEAD = (
    "| workspaces | active | calls/s | p50 / p99 ms | held? | engine RSS / PSS MB | engine fds "
    "| gateway fds / RSS MB | embedder RSS MB | server CPU ms per call | load |\n" + "|" + "---|" * 11
)


def line(s: Step) -> str:
    held = "yes" if s.held else f"**no**{' (lost/errors)' if s.problems or s.errors else ''}"
    return (
        f"| {s.workspaces} | {s.active} | {s.calls_per_s:.0f} | {s.p50:.1f} / {s.p99:.1f} | {held} "
        f"| {s.rss_mb:.0f} / {s.pss_mb:.0f} | {s.fds:.0f} | {s.gateway_fds} / {s.gateway_rss_mb:.0f} "
        f"| {s.embedder_rss_mb:.0f} | {s.cpu_ms:.1f} | {s.load:.1f} |"
    )


def bounds(steps: list[Step], memory_bytes: int, fd_limit: int, cores: int) -> str:
    """What bounds a node, from the steps: CPU measured, memory and descriptors extrapolated; and
    which bound a node of this host's cores with :data:`NODE_GB` of memory meets first."""
    passed = [s for s in steps if s.held]
    last = steps[-1]
    cpu = max((s.workspaces for s in passed), default=0)
    capped = last.held  # every step held: the CPU bound is above the largest one tried
    lines = [
        f"- **CPU (measured on this host, {cores} cores, the clients on the same cores):** "
        + (f"{cpu} workspaces held p99 ≤ {P99_MS:g} ms" if passed else f"no step held p99 ≤ {P99_MS:g} ms")
        + (
            " (the largest step tried: the bound is higher)."
            if capped
            else f"; {last.workspaces} did not (p99 {last.p99:.0f} ms)."
        )
    ]
    found: dict[str, float] = {"CPU": math.inf if capped else cpu}
    spent = max((s.cpu_ms for s in steps), default=0.0)
    per_client = max((s.calls_per_s / s.active for s in steps), default=0.0)
    if spent and per_client:
        carried = cores * 1000 / spent  # calls/s the cores carry at full use, nothing else running
        workspaces = int(carried / 2 / per_client / ACTIVE_SHARE)
        if capped:  # no step reached the CPU bound: the extrapolation is the figure there is
            found["CPU"] = max(cpu, workspaces)
        lines.append(
            f"- **CPU (extrapolated from the CPU per call):** {spent:.1f} ms of server CPU per call "
            f"(gateway, engine, embedder) is at most {carried:.0f} calls/s on {cores} cores; at half "
            f"of that (a p99 needs idle cores) and {per_client:.1f} calls/s per active workspace (this "
            f"run's pace) ≈ {workspaces:,} workspaces with {_share()} active (the clients elsewhere)."
        )
    by_pss = all(s.pss_mb > 0 for s in steps)  # memory really used, where the host reports it
    if by_pss:
        fixed = last.shared_pss_mb * 2**20
        # at the largest step: an engine's PSS falls as more engines share the template's pages,
        # so the most engines measured give the closest figure that is still an upper bound
        per_engine = last.pss_mb * 2**20
        measure, shared = f"PSS at {last.workspaces} workspaces", "the gateway, embedder and template"
    else:
        fixed = (last.gateway_rss_mb + last.embedder_rss_mb) * 2**20
        per_engine = max((s.rss_mb for s in steps), default=0.0) * 2**20
        measure, shared = "RSS", "the gateway and embedder"
    if per_engine:
        for label, total in (("this host", memory_bytes), (f"a {NODE_GB:g} GB node", int(NODE_GB * 2**30))):
            engines = max(0, int((total * 0.9 - fixed) // per_engine))
            workspaces = int(engines / ACTIVE_SHARE)
            found["memory"] = workspaces  # the last: the node's
            lines.append(
                f"- **Memory ({label}, {total / 2**30:.0f} GB; extrapolated, by {measure}):** 90 % of "
                f"it less {shared} ({fixed / 2**20:.0f} MB) over {per_engine / 2**20:.0f} MB per "
                f"running engine ≈ {engines:,} engines at once ≈ {workspaces:,} workspaces with "
                f"{_share()} active."
            )
    per_active = max((s.gateway_fds / s.active for s in steps), default=0.0)
    if per_active:
        workspaces = int(fd_limit / per_active / ACTIVE_SHARE)
        found["file descriptors"] = workspaces
        lines.append(
            f"- **File descriptors (extrapolated):** each engine holds its own (≈ {last.fds:.0f}, "
            f"within its own limit); the gateway holds ≈ {per_active:.1f} per active workspace (its "
            f"connections to clients and engines, the engines' pipes), so a limit of {fd_limit:,} "
            f"allows ≈ {workspaces:,} workspaces with {_share()} active."
        )
    first = min(found, key=lambda k: found[k])
    lines.append(
        f"- **Bound first on a {NODE_GB:g} GB node with {cores} cores:** {first}"
        + (" (CPU not reached by the steps tried)" if capped and first != "CPU" else "")
        + "."
    )
    return "\n".join(lines) + "\n"


HEADING = "## Workspaces per node (`bench/node.py`)"
START, END = "<!-- node-bench:start -->", "<!-- node-bench:end -->"


def section(command: str, steps: list[Step], seconds: float, pace: float, note: str = "") -> str:
    """The docs section: the command, the steps, and what bounds a node."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cores = os.cpu_count() or 1
    return (
        f"{HEADING}\n\n"
        f"`{command}`, {time.strftime('%Y-%m-%d %H:%M')} UTC on {cores} CPUs and "
        f"{memory / 2**30:.0f} GB (the clients on the same cores), {seconds:g} s a step, "
        f"{_share()} of the workspaces active with one client each, {pace:g} s between its "
        f"calls (the mixed stream); the others registered and asleep. {note}\n\n"
        + HEAD
        + "\n"
        + "\n".join(line(s) for s in steps)
        + "\n\n"
        + bounds(steps, memory, soft, cores)
    )
