"""Throughput under load (``rel:load``, ``perf:gateway``): many MCP clients, one or many workspaces.

    python -m bench.load                       the full table (about 25 rows; minutes)
    python -m bench.load --quick               two rows of 8 s each (≤ 60 s on a quiet host)
    python -m bench.load --rows 8x1:mixed,32x16:mixed:limited --seconds 30
    python -m bench.load --write-docs          also write the table into docs/benchmarks.md
    python -m bench.load --node                the most workspaces one node serves (bench/node.py)

Each row starts its own ``almanac serve`` (port 0, the shared embedder on, as in production) over
fresh workspaces and gives every client its own token (a ``pat`` connection of the workspace's
owner). The clients are the real ``mcp`` client; each connects (untimed), then all call in a loop for
``--seconds``, one call at a time each, and every call is timed. A row is written
``CLIENTSxWORKSPACES:MIX[:limited]``:

- ``MIX`` is ``reads`` (``get_context`` 3 : 1 ``retrieve_memory``), ``writes`` (the mixed write
  stream of :mod:`bench.reliability.workload`: notes, facts and their supersedes, day-log entries,
  retire/restore) or ``mixed`` (half each);
- with more than one workspace, the workspaces sleep and wake: the idle timeout is short
  (:data:`IDLE_S`), each workspace is busy for :data:`ACTIVE_S`, then its clients rest until its
  engine has stopped, then the next call wakes it. The calls that woke a workspace are counted on
  their own (``wake calls``) and left out of the percentiles, which are those of warm calls;
- ``limited``: the gateway's per-token rate limit at its defaults (otherwise it is set out of reach).
  A refused call (429) is counted in its own column, never in the latency or the calls/s; the
  client waits and goes on.

At the end of a row every acknowledged write is read back through the tools and found on disk
(:mod:`bench.reliability.check`); a row with a lost write, or an error other than a 429, fails the
run (exit 1). Ratios: p50 over the one-client p50 of the same mix (same run), and p50 over the
in-process work per call of the same mix (``Memory.remember`` / ``Recall.get_context`` in this
process, no transport, on a workspace embedded by the same shared embedder).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench import node
from bench.crowd import ACTIVE_S, DEFAULT_LIMIT, IDLE_S, Outcome, Row, in_process_ms, run_row
from bench.reliability.procs import GatewayRun
from bench.sections import replace_section

MIXES = ("reads", "writes", "mixed")
#: The full table: one workspace at N = 1, 2, 8, 32, every mix; 32 clients over W = 4, 16 and 50
#: clients over 50 workspaces, every mix; then the rate limit on for two mixed rows.
FULL = (
    [f"{n}x1:{mix}" for mix in MIXES for n in (1, 2, 8, 32)]
    + [f"{max(32, w)}x{w}:{mix}" for w in (4, 16, 50) for mix in MIXES]
    + ["8x1:mixed:limited", "32x16:mixed:limited"]
)
QUICK = ["8x1:mixed", "8x4:mixed"]
HEADING = "## Throughput under load (`bench/load.py`)"
START, END = "<!-- load-bench:start -->", "<!-- load-bench:end -->"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def table(outcomes: list[Outcome], inproc: dict[str, float]) -> str:
    one = {o.row.mix: o.p(0.5) for o in outcomes if o.row.clients == 1 and o.row.workspaces == 1}
    head = (
        "| clients × workspaces | mix | rate limit | calls/s | p50 / p95 / p99 ms | p50 × one client "
        "| p50 × in-process | wake calls (p50 ms) | 429s | writes acked / lost | errors "
        "| CPU ms per call: clients / gateway / engines / embedder | engines running: PSS MB / fds (mean) |"
    )
    lines = [head, "|" + "---|" * 13]
    for o in outcomes:
        r = o.row
        rate = o.calls / o.elapsed if o.elapsed else float("nan")
        p50 = o.p(0.5)
        x_one = f"{p50 / one[r.mix]:.1f}" if r.mix in one and one[r.mix] > 0 else "-"
        x_in = f"{p50 / inproc[r.mix]:.1f}" if inproc.get(r.mix) else "-"
        wakes = f"{len(o.wakes)} ({statistics.median(o.wakes) * 1000:.0f})" if o.wakes else "-"
        errors = ", ".join(f"{k}: {n}" for k, n in sorted(o.errors.items())) or "0"
        footprint = "-"
        if o.engines:
            pss = statistics.mean(p for p, _ in o.engines) / 2**20
            footprint = f"{len(o.engines)}: {pss:.0f} / {statistics.mean(f for _, f in o.engines):.0f}"
        roles = ("clients", "gateway", "engines", "embedder")
        per_call = {r: f"{o.cpu.get(r, 0.0) * 1000 / o.calls:.1f}" for r in roles} if o.calls else {}
        if per_call and o.engines_gone:  # an engine slept in the window: its CPU there is not counted
            per_call["engines"] = "≥ " + per_call["engines"]
        cpu = " / ".join(per_call.values()) if per_call else "-"
        lines.append(
            f"| {r.clients} × {r.workspaces}{' (sleeping and waking)' if r.sleeping else ''} | {r.mix} "
            f"| {'on' if r.limited else 'off'} | {rate:.0f} | {p50:.1f} / {o.p(0.95):.1f} / {o.p(0.99):.1f} "
            f"| {x_one} | {x_in} | {wakes} | {o.limited} | {o.acked} / {len(o.problems)} | {errors} "
            f"| {cpu} | {footprint} |"
        )
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace this bench's section of ``path`` (between its markers), or append it."""
    replace_section(path, START, END, section)


#: The targets of ``rel:load`` a row is held to: (clients, workspaces, mix) → (calls/s, p99 ms).
TARGETS = {(8, 1, "mixed"): (400.0, 50.0), (32, 16, "mixed"): (400.0, 100.0)}


def why(o: Outcome, target: tuple[float, float], cores: int) -> str:
    """Why a row missed its target, from its own measurements: the CPU a call cost, process by
    process, and the most calls/s ``cores`` could carry at that cost; "-" when it met it."""
    rate, p99 = o.calls / o.elapsed, o.p(0.99)
    if rate >= target[0] and p99 <= target[1]:
        return "-"
    if not o.cpu or not o.calls:
        return "CPU per call not measured"
    per_call = {role: seconds * 1000 / o.calls for role, seconds in o.cpu.items()}
    cost = sum(per_call.values())
    bound = "≥ " if o.engines_gone else ""
    parts = ", ".join(f"{role} {ms:.1f}" for role, ms in per_call.items())
    busy = rate * cost / (cores * 1000)
    text = (
        f"a call cost {bound}{cost:.1f} ms of CPU ({parts}); {cores} cores carry at most "
        f"{cores * 1000 / cost:.0f} calls/s at that cost"
    )
    if rate < target[0]:
        text += f", {target[0]:g} calls/s needs ≤ {cores * 1000 / target[0]:.1f} ms a call"
    text += f"; the cores were {busy:.0%} busy"
    if o.wakes:
        wait = statistics.median(o.wakes) * 1000
        text += f", and {len(o.wakes)} calls waited for an engine to start (p50 {wait:.0f} ms)"
    return text


def verdicts(outcomes: list[Outcome], cores: int | None = None) -> str:
    """A "met?" line for each measured row that has a target (no rate limit): yes only if both
    hold, and why not when not (:func:`why`)."""
    cores = cores or os.cpu_count() or 1
    lines = []
    for o in outcomes:
        target = TARGETS.get((o.row.clients, o.row.workspaces, o.row.mix))
        if target is None or o.row.limited or not o.latencies or not o.elapsed:
            continue
        rate, p99 = o.calls / o.elapsed, o.p(0.99)
        met = "yes" if rate >= target[0] and p99 <= target[1] else "**no**"
        lines.append(
            f"| {o.row.clients} × {o.row.workspaces} {o.row.mix} | ≥ {target[0]:g} calls/s, p99 ≤ "
            f"{target[1]:g} ms | {rate:.0f} calls/s, p99 {p99:.1f} ms | {met} | {why(o, target, cores)} |"
        )
    if not lines:
        return ""
    return "\n| row | target | measured | met? | why not |\n|---|---|---|---|---|\n" + "\n".join(lines) + "\n"


def section(
    command: str,
    seconds: float,
    outcomes: list[Outcome],
    inproc: dict[str, float],
    note: str,
    limit: tuple[float, int] = DEFAULT_LIMIT,
) -> str:
    shape = ", ".join(f"{k} {v:.2f} ms" for k, v in inproc.items())
    return (
        f"{HEADING}\n\n"
        f"`{command}`, {time.strftime('%Y-%m-%d %H:%M')} UTC on {os.cpu_count()} CPUs (the clients on "
        f"the same cores), {seconds:g} s a row, load average {os.getloadavg()[0]:.1f} at the end. "
        f"{note}\n\n"
        f"Rate limit on: {limit[0]:g} calls/s per token, burst {limit[1]}. "
        "Percentiles are of warm calls; a sleeping-and-waking row counts the calls that woke a "
        f"workspace on their own (idle timeout {IDLE_S:g} s, each workspace busy {ACTIVE_S:g} s at a "
        "time). 429s are counted apart and are not in calls/s. In-process work per call (p50, same "
        f"run): {shape}. Every acknowledged write was read back through the tools and found on disk: "
        '"lost" counts any that was not. CPU per call is counted process by process over the timed '
        "window; an engine that went to sleep in it takes its CPU there with it, so such a row's "
        "engines figure is a lower bound (≥). How these figures were first studied, and what was "
        "left and why: `docs/perf-journal/2026-12-04-throughput.md`.\n\n"
        + table(outcomes, inproc)
        + verdicts(outcomes)
    )


async def run(
    rows: list[Row], seconds: float, seed: int, inproc_calls: int, limit: tuple[float, int] = DEFAULT_LIMIT
) -> tuple[list[Outcome], dict[str, float]]:
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="alm-load-"))
    inproc: dict[str, float] = {}

    async def baseline(gateway: GatewayRun) -> None:
        """Before the first row's clients start, beside its gateway (its embedder shared)."""
        inproc.update(await in_process_ms(root / "inproc", inproc_calls, gateway))

    outcomes = []
    for i, row in enumerate(rows):
        first = baseline if i == 0 and inproc_calls else None
        outcome = await run_row(root / f"row{i}", row, seconds, rng, limit, first)
        print(table([outcome], inproc), end="", flush=True)
        outcomes.append(outcome)
    return outcomes, inproc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", help="comma-separated CLIENTSxWORKSPACES:MIX[:limited] (default: all)")
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}, 8 s each")
    parser.add_argument("--seconds", type=float, help="timed seconds per row (default 20; 8 with --quick)")
    parser.add_argument(
        "--in-process-calls", type=int, help="in-process calls per tool (100; 40 with --quick; 0: none)"
    )
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--rate-limit",
        default=f"{DEFAULT_LIMIT[0]:g}/{DEFAULT_LIMIT[1]}",
        help="a limited row's per-token limit, PER_SECOND/BURST (default: the gateway's defaults)",
    )
    parser.add_argument("--note", default="", help="a sentence for the docs (say if the host was shared)")
    parser.add_argument(
        "--write-docs",
        type=Path,
        nargs="?",
        const=DOCS,
        default=None,
        help="update this file (default: docs/benchmarks.md)",
    )
    parser.add_argument(
        "--node", action="store_true", help="find the most workspaces one node serves, 10 %% active"
    )
    parser.add_argument("--node-steps", help="with --node: workspaces per step, comma-separated")
    parser.add_argument(
        "--pace", type=float, default=0.0, help="with --node: seconds between an active client's calls"
    )
    args = parser.parse_args(argv)
    args.argv = argv
    if args.node:
        return node_main(args, parser)
    try:
        names = args.rows.split(",") if args.rows else QUICK if args.quick else FULL
        rows = [Row.parse(n) for n in names]
        rate, burst = args.rate_limit.split("/")
        limit = (float(rate), int(burst))
    except ValueError as exc:
        parser.error(str(exc))
    seconds = args.seconds if args.seconds is not None else 8.0 if args.quick else 20.0
    inproc_calls = args.in_process_calls
    if inproc_calls is None:
        inproc_calls = 40 if args.quick else 100
    outcomes, inproc = anyio.run(run, rows, seconds, args.seed, inproc_calls, limit)
    command = "python -m bench.load " + " ".join(argv if argv is not None else sys.argv[1:])
    text = section(command.strip(), seconds, outcomes, inproc, args.note, limit)
    print(text)
    if args.write_docs is not None:
        write_section(args.write_docs, text)
    failed = any(o.problems or o.errors for o in outcomes)
    for o in outcomes:
        for problem in o.problems[:20]:
            print(f"- {o.row.name}: {problem}")
    return 1 if failed else 0


def node_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        steps = [int(n) for n in args.node_steps.split(",")] if args.node_steps else list(node.STEPS)
    except ValueError as exc:
        parser.error(str(exc))
    if not steps or min(steps) < 1:
        parser.error("--node-steps: positive numbers of workspaces")
    seconds = args.seconds if args.seconds is not None else 20.0
    done = anyio.run(node.search, steps, seconds, args.pace, args.seed)
    command = "python -m bench.load " + " ".join(sys.argv[1:] if args.argv is None else args.argv)
    text = node.section(command.strip(), done, seconds, args.pace, args.note)
    print()
    print(text)
    if args.write_docs is not None:
        replace_section(args.write_docs, node.START, node.END, text)
    return 1 if any(s.problems or s.errors for s in done) else 0


if __name__ == "__main__":
    sys.exit(main())
