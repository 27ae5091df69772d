"""Throughput under load (``rel:load``, ``perf:gateway``): many MCP clients, one or many workspaces.

    python -m bench.load                       the full table (about 25 rows; minutes)
    python -m bench.load --quick               two rows of 8 s each (≤ 60 s on a quiet host)
    python -m bench.load --rows 8x1:mixed,32x16:mixed:limited --seconds 30
    python -m bench.load --write-docs          also write the table into docs/benchmarks.md

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
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bench.gateway import cpu_seconds, engine_children, in_process, percentile, pss_bytes, wait_until
from bench.reliability.check import check_disk, check_tools
from bench.reliability.procs import GatewayRun
from bench.reliability.workload import Journal, Writer, error_kind
from gateway import layout
from gateway.control.store import ControlPlane
from gateway.settings import Settings

#: A sleeping-and-waking row: the engine idle timeout, and how long a workspace is busy at a time.
IDLE_S = 1.0
ACTIVE_S = 4.0
MIXES = ("reads", "writes", "mixed")
#: The full table: one workspace at N = 1, 2, 8, 32, every mix; 32 clients over W = 4, 16 and 50
#: clients over 50 workspaces, every mix; then the rate limit on for two mixed rows.
FULL = (
    [f"{n}x1:{mix}" for mix in MIXES for n in (1, 2, 8, 32)]
    + [f"{max(32, w)}x{w}:{mix}" for w in (4, 16, 50) for mix in MIXES]
    + ["8x1:mixed:limited", "32x16:mixed:limited"]
)
QUICK = ["8x1:mixed", "8x4:mixed"]
SEED_NOTES = 20
SEED_TEXT = "seed {}: the fjord deploy uses blue-green"
HEADING = "## Throughput under load (`bench/load.py`)"
START, END = "<!-- load-bench:start -->", "<!-- load-bench:end -->"
T = TypeVar("T")
_ROW = re.compile(r"^(\d+)x(\d+):(reads|writes|mixed)(:limited)?$")


@dataclass(frozen=True)
class Row:
    clients: int
    workspaces: int
    mix: str
    limited: bool = False

    @classmethod
    def parse(cls, text: str) -> Row:
        found = _ROW.match(text.strip())
        if found is None:
            raise ValueError(f"{text!r} is not a row: write CLIENTSxWORKSPACES:reads|writes|mixed[:limited]")
        clients, workspaces = int(found.group(1)), int(found.group(2))
        if clients < 1 or workspaces < 1 or clients < workspaces:
            raise ValueError(f"{text!r}: at least one client per workspace, and at least one of each")
        return cls(clients, workspaces, found.group(3), bool(found.group(4)))

    @property
    def name(self) -> str:
        return f"{self.clients}x{self.workspaces}:{self.mix}" + (":limited" if self.limited else "")

    @property
    def sleeping(self) -> bool:
        return self.workspaces > 1


@dataclass
class Outcome:
    row: Row
    seconds: float
    latencies: list[float] = field(default_factory=list)  # warm calls, seconds
    wakes: list[float] = field(default_factory=list)  # calls that woke a sleeping workspace
    limited: int = 0  # 429s
    errors: Counter[str] = field(default_factory=Counter)
    acked: int = 0
    problems: list[str] = field(default_factory=list)
    engine_starts: int = 0
    elapsed: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds in the timed window, by role
    engines: list[tuple[int, int]] = field(default_factory=list)  # (PSS, fds) of each running engine

    @property
    def calls(self) -> int:
        return len(self.latencies) + len(self.wakes)

    def p(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000 if self.latencies else float("nan")


@dataclass
class Space:
    """One workspace of a row: its clients' tokens, journal and state (busy or resting)."""

    tokens: list[str]
    seeder: str  # a token of its own for the untimed seed notes (the clients' buckets start full)
    journal: Journal = field(default_factory=Journal)
    resting: bool = False
    woke: set[int] = field(default_factory=set)  # clients whose next call is the first after a rest


def seed_tokens(run: GatewayRun, row: Row, tag: str) -> list[Space]:
    """One owner per workspace, with one token per client of that workspace (round robin)."""
    store = ControlPlane.open(layout.control_db(run.data_dir.resolve()))
    try:
        spaces = []
        for w in range(row.workspaces):
            owner, ws = store.create_owner(f"{tag}{w}@load.example", None)
            share = row.clients // row.workspaces + (w < row.clients % row.workspaces)
            tokens = [store.create_pat(owner.id, ws.id, f"load-{k}")[1] for k in range(share)]
            run.tokens.update(dict.fromkeys(tokens, ws.id))
            seeder = store.create_pat(owner.id, ws.id, "load-seed")[1]
            run.tokens[seeder] = ws.id
            spaces.append(Space(tokens, seeder))
        return spaces
    finally:
        store.close()


#: The per-token rate limit of a ``limited`` row: the gateway's defaults (per second, burst).
DEFAULT_LIMIT = (Settings().rate_limit_per_second, Settings().rate_limit_burst)


def gateway_settings(row: Row, limit: tuple[float, int] = DEFAULT_LIMIT) -> dict[str, str]:
    settings = {"embedder": "true", "engine_start_timeout": "60", "max_engines": "200"}
    if row.sleeping:
        settings["engine_idle_timeout"] = str(IDLE_S)
    if row.limited:
        settings["rate_limit_per_second"] = str(limit[0])
        settings["rate_limit_burst"] = str(limit[1])
    return settings


async def one_call(client: Client, writer: Writer, mix: str) -> str | None:
    """One call of the row's mix; the tool's refusal (None when it answered)."""
    rng = writer.rng
    if mix == "writes" or (mix == "mixed" and rng.random() < 0.5):
        before = sum(writer.journal.errors.values())
        await writer.send(client, writer.next_write())
        return "write refused" if sum(writer.journal.errors.values()) > before else None
    if rng.random() < 0.75:
        reply = await client.call_tool("get_context", {"query": f"fjord deploy {rng.randint(0, 50)}"})
    else:
        reply = await client.call_tool("retrieve_memory", {"subject": f"{writer.name} item 1"})
    return "read refused" if reply.is_error else None


async def run_row(
    root: Path, row: Row, seconds: float, rng: random.Random, limit: tuple[float, int] = DEFAULT_LIMIT
) -> Outcome:
    out = Outcome(row, seconds)
    root.mkdir(parents=True)
    run = GatewayRun(root, gateway_settings(row, limit))
    spaces = seed_tokens(run, row, "load")
    run.start()
    try:
        await seed(run, spaces, Backoff.of(limit))
        await measure(run, row, spaces, seconds, rng, out, Backoff.of(limit))
        out.engine_starts = _counter(run.metrics(), "almanac_engine_cold_starts_total")
        if row.limited:  # read back through a gateway on the same data, the limit out of reach
            if run.stop() != 0:
                out.problems.append("the gateway did not exit 0 on SIGTERM")
            run.settings = gateway_settings(Row(row.clients, row.workspaces, row.mix))
            run.start()
        await read_back(run, spaces, out)
    finally:
        if run.stop() != 0:
            out.problems.append("the gateway did not exit 0 on SIGTERM")
    out.acked = sum(space.journal.acked for space in spaces)
    return out


@asynccontextmanager
async def connect(url: str, token: str, statuses: Counter[int]) -> AsyncIterator[Client]:
    """The ``mcp`` client with its own token; ``statuses`` counts the HTTP statuses it gets (the
    client reports a 429 as a generic error response: the status tells it apart)."""

    async def seen(response: httpx2.Response) -> None:
        statuses[response.status_code] += 1

    headers = {"Authorization": f"Bearer {token}"}
    http = httpx2.AsyncClient(headers=headers, timeout=60, event_hooks={"response": [seen]})
    async with http, Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
        yield client


@dataclass(frozen=True)
class Backoff:
    """After a 429: a refused call waits for one token (``call``); a refused connect for the whole
    burst (``connect``: a connect is several requests, and retried on a trickle it never gets them all)."""

    call: float
    connect: float

    @classmethod
    def of(cls, limit: tuple[float, int]) -> Backoff:
        return cls(1.0 / limit[0], limit[1] / limit[0])


async def limited_call(
    statuses: Counter[int], backoff: Backoff, call: Callable[[], Awaitable[T]]
) -> tuple[T | None, int]:
    """``call()``, or None after a 429 (waited out); with the number of 429s it met."""
    before = statuses[429]
    try:
        return await call(), 0
    except MCPError:
        if statuses[429] == before:
            raise
    await anyio.sleep(backoff.call)
    return None, statuses[429] - before


async def seed(run: GatewayRun, spaces: list[Space], backoff: Backoff) -> None:
    """A few notes in each workspace (untimed), so that reads find something from the first call
    (a 429 is waited out)."""

    async def one(space: Space) -> None:
        done, statuses = 0, Counter[int]()
        while done < SEED_NOTES:
            limited = statuses[429]
            try:
                async with connect(run.url, space.seeder, statuses) as client:
                    while done < SEED_NOTES:
                        args = {"statement": SEED_TEXT.format(done)}
                        answered, _ = await limited_call(
                            statuses, backoff, partial(client.call_tool, "remember", args)
                        )
                        done += answered is not None
            except Exception:
                if statuses[429] == limited:
                    raise
                await anyio.sleep(backoff.connect)

    async with anyio.create_task_group() as tg:
        for space in spaces:
            tg.start_soon(one, space)


async def measure(
    run: GatewayRun,
    row: Row,
    spaces: list[Space],
    seconds: float,
    rng: random.Random,
    out: Outcome,
    backoff: Backoff,
) -> None:
    ready = anyio.Event()
    connected = [0]
    total = sum(len(s.tokens) for s in spaces)
    deadline = [float("inf")]

    def over() -> bool:
        return time.monotonic() >= deadline[0]

    async def client_loop(space: Space, k: int) -> None:
        token = space.tokens[k]
        writer = Writer(f"c{id(space) % 10_000}-{k}", space.journal, random.Random(rng.getrandbits(64)))
        first, statuses = True, Counter[int]()
        while not over():
            limited = statuses[429]
            try:
                async with connect(run.url, token, statuses) as client:
                    if first:
                        connected[0] += 1
                        if connected[0] == total:
                            ready.set()
                        first = False
                        await ready.wait()
                    while not over():
                        if space.resting:
                            await anyio.sleep(0.02)
                            continue
                        waking = k in space.woke
                        space.woke.discard(k)
                        began = time.perf_counter()
                        refused, met = await limited_call(
                            statuses, backoff, partial(one_call, client, writer, row.mix)
                        )
                        took = time.perf_counter() - began
                        out.limited += met
                        if met:
                            space.woke.update([k] if waking else [])
                        elif refused is not None:
                            out.errors[refused] += 1
                        elif not over():
                            (out.wakes if waking else out.latencies).append(took)
            except Exception as exc:  # a 429, or a broken call: counted, then a new connection
                if statuses[429] > limited:
                    out.limited += statuses[429] - limited
                    await anyio.sleep(backoff.connect)
                else:
                    out.errors[error_kind(exc)] += 1
                    await anyio.sleep(0.05)

    def asleep(token: str) -> None:
        wait_until(lambda: run.engine_pid(token) is None or over(), 120, "an idle stop")

    async def conductor(space: Space) -> None:
        """Busy for ACTIVE_S, then rest until the engine has idled out; again until the end."""
        await ready.wait()
        while not over():
            await anyio.sleep(min(ACTIVE_S, max(0.0, deadline[0] - time.monotonic())))
            if over():
                return
            space.resting = True
            await anyio.to_thread.run_sync(asleep, space.tokens[0])
            space.woke = set(range(len(space.tokens)))
            space.resting = False

    async with anyio.create_task_group() as tg:
        for space in spaces:
            for k in range(len(space.tokens)):
                tg.start_soon(client_loop, space, k)
            if row.sleeping:
                tg.start_soon(conductor, space)
        await ready.wait()
        before = cpu_by_role(run)
        began = time.monotonic()
        deadline[0] = began + seconds
        await anyio.sleep(seconds)
        after = cpu_by_role(run)
        out.cpu = {role: after[role] - before.get(role, 0.0) for role in after}
        out.engines = engine_footprints(run)
    out.elapsed = seconds


def engine_footprints(run: GatewayRun) -> list[tuple[int, int]]:
    """(PSS bytes, open file descriptors) of each workspace engine running now."""
    assert run.served is not None
    found = []
    for role, pid in engine_children(run.served.proc.pid).items():
        if role in ("embedder", "spare"):
            continue
        try:
            found.append((pss_bytes(pid), len(os.listdir(f"/proc/{pid}/fd"))))
        except OSError:  # it exited meanwhile
            continue
    return found


def cpu_by_role(run: GatewayRun) -> dict[str, float]:
    """CPU seconds so far of the bench's own process (the clients), the gateway, its workspace
    engines (those running now) and the shared embedder."""
    assert run.served is not None
    gateway = run.served.proc.pid
    found = {"clients": cpu_seconds(os.getpid()), "gateway": cpu_seconds(gateway), "engines": 0.0}
    for role, pid in engine_children(gateway).items():
        try:
            used = cpu_seconds(pid)
        except OSError:  # it exited meanwhile
            continue
        if role == "embedder":
            found["embedder"] = used
        elif role != "spare":
            found["engines"] += used
    return found


async def read_back(run: GatewayRun, spaces: list[Space], out: Outcome, readers: int = 4) -> None:
    """Every acknowledged write, through the tools (``readers`` clients per workspace) and on disk."""
    for space in spaces:
        memories = list(space.journal.memories.values())
        parts = [Journal(memories={m.id: m for m in memories[i::readers]}) for i in range(readers)]

        async def check(part: Journal, token: str) -> None:
            async with run.connect(token) as client:
                out.problems.extend(await check_tools(client, part))

        async with anyio.create_task_group() as tg:
            for i, part in enumerate(parts):
                tg.start_soon(check, part, space.tokens[i % len(space.tokens)])
        out.problems += check_disk(run.workspace(space.tokens[0]), space.journal)


def _counter(metrics: str, name: str) -> int:
    total = 0.0
    for line in metrics.splitlines():
        series, _, value = line.rpartition(" ")
        if series == name or series.startswith(name + "{"):
            total += float(value)
    return int(total)


async def in_process_ms(root: Path, calls: int) -> dict[str, float]:
    """p50 ms of the in-process work per call of each mix, with the shared embedder of a gateway."""
    root.mkdir(parents=True)
    run = GatewayRun(root, {"embedder": "true"})
    run.start()
    try:
        socket = layout.runtime_dir(run.data_dir.resolve(), None) / "embedder.sock"
        wait_until(socket.exists, 60, "the embedder")
        async with in_process(root / "inproc", socket) as call:
            for i in range(SEED_NOTES):
                await call("remember", {"statement": SEED_TEXT.format(i)})
            times: dict[str, list[float]] = {"remember": [], "get_context": []}
            for i in range(calls):
                for tool, args in (
                    ("remember", {"statement": f"in-process note {i} about the fjord"}),
                    ("get_context", {"query": f"fjord deploy {i % 50}"}),
                ):
                    began = time.perf_counter()
                    await call(tool, args)
                    times[tool].append((time.perf_counter() - began) * 1000)
    finally:
        run.stop()
    write, read = statistics.median(times["remember"]), statistics.median(times["get_context"])
    return {"writes": write, "reads": read, "mixed": (write + read) / 2}


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
        cpu = " / ".join(f"{o.cpu.get(r, 0.0) * 1000 / o.calls:.1f}" for r in roles) if o.calls else "-"
        lines.append(
            f"| {r.clients} × {r.workspaces}{' (sleeping and waking)' if r.sleeping else ''} | {r.mix} "
            f"| {'on' if r.limited else 'off'} | {rate:.0f} | {p50:.1f} / {o.p(0.95):.1f} / {o.p(0.99):.1f} "
            f"| {x_one} | {x_in} | {wakes} | {o.limited} | {o.acked} / {len(o.problems)} | {errors} "
            f"| {cpu} | {footprint} |"
        )
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace this bench's section of ``path`` (between its markers), or append it."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    block = f"{START}\n{section.strip()}\n{END}"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


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
        '"lost" counts any that was not.\n\n' + table(outcomes, inproc)
    )


async def run(
    rows: list[Row], seconds: float, seed: int, inproc_calls: int, limit: tuple[float, int] = DEFAULT_LIMIT
) -> tuple[list[Outcome], dict[str, float]]:
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="alm-load-"))
    inproc = await in_process_ms(root / "inproc", inproc_calls) if inproc_calls else {}
    outcomes = []
    for i, row in enumerate(rows):
        outcome = await run_row(root / f"row{i}", row, seconds, rng, limit)
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
    parser.add_argument("--write-docs", type=Path, nargs="?", const=Path("docs/benchmarks.md"), default=None)
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
