"""The clients of one row of ``python -m bench.load`` and the gateway they call (``rel:load``).

A row (:class:`Row`) starts its own ``almanac serve`` over fresh workspaces, gives every client its
own token, seeds each workspace with a few notes (untimed), times every call of every client for
the row's seconds (:func:`measure`; workspaces sleep and wake when there are several), reads the
CPU each process spent and what each engine holds, then reads every acknowledged write back
through the tools and on disk (:func:`read_back`). :func:`in_process_ms` times the same work with
no transport, the baseline the table divides by.
"""

from __future__ import annotations

import os
import random
import re
import statistics
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

from bench.gateway import in_process
from bench.processes import cpu_seconds, engine_children, percentile, pss_bytes, wait_until
from bench.reliability.check import check_disk, check_tools
from bench.reliability.procs import GatewayRun
from bench.reliability.workload import Journal, Writer, error_kind
from gateway import layout
from gateway.control.store import ControlPlane
from gateway.settings import Settings

#: A sleeping-and-waking row: the engine idle timeout, and how long a workspace is busy at a time.
IDLE_S = 1.0
ACTIVE_S = 4.0
SEED_NOTES = 20
SEED_TEXT = "seed {}: the fjord deploy uses blue-green"
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
    engines_gone: bool = False  # an engine exited in the window: the engines' CPU is a lower bound
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
            owner, ws = store.owners.create(f"{tag}{w}@load.example", None)
            share = row.clients // row.workspaces + (w < row.clients % row.workspaces)
            tokens = [store.connections.create_pat(owner.id, ws.id, f"load-{k}")[1] for k in range(share)]
            run.tokens.update(dict.fromkeys(tokens, ws.id))
            seeder = store.connections.create_pat(owner.id, ws.id, "load-seed")[1]
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
    root: Path,
    row: Row,
    seconds: float,
    rng: random.Random,
    limit: tuple[float, int] = DEFAULT_LIMIT,
    first: Callable[[GatewayRun], Awaitable[None]] | None = None,
) -> Outcome:
    """One row on its own gateway; ``first`` runs once that gateway is up, before anything else."""
    out = Outcome(row, seconds)
    root.mkdir(parents=True)
    run = GatewayRun(root, gateway_settings(row, limit))
    spaces = seed_tokens(run, row, "load")
    run.start()
    try:
        if first is not None:
            await first(run)
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
    *,
    pace: float = 0.0,
    sleeping: bool | None = None,
) -> None:
    """Every client calls for ``seconds``, one call at a time, ``pace`` seconds apart (0: back to
    back); the workspaces sleep and wake when ``sleeping`` (default: when the row has several)."""
    sleeping = row.sleeping if sleeping is None else sleeping
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
                        if run.engine_pid(token) is None:  # it idled out while the clients connected
                            space.woke.add(k)
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
                        if pace:
                            await anyio.sleep(pace)
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
            if sleeping:
                tg.start_soon(conductor, space)
        await ready.wait()
        before = cpu_by_process(run)
        began = time.monotonic()
        deadline[0] = began + seconds
        await anyio.sleep(seconds)
        after = cpu_by_process(run)
        out.cpu, out.engines_gone = cpu_in_window(before, after)
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


def cpu_by_process(run: GatewayRun) -> dict[tuple[str, int], float]:
    """CPU seconds so far, by (role, pid): the bench's own process (the clients), the gateway, each
    workspace engine running now and the shared embedder."""
    assert run.served is not None
    gateway = run.served.proc.pid
    found = {("clients", os.getpid()): cpu_seconds(os.getpid()), ("gateway", gateway): cpu_seconds(gateway)}
    for role, pid in engine_children(gateway).items():
        if role == "spare":
            continue
        try:
            found["embedder" if role == "embedder" else "engines", pid] = cpu_seconds(pid)
        except OSError:  # it exited meanwhile
            continue
    return found


def cpu_in_window(
    before: dict[tuple[str, int], float], after: dict[tuple[str, int], float]
) -> tuple[dict[str, float], bool]:
    """CPU seconds by role between two readings, process by process, and whether an engine exited
    in between (its CPU in the window is then missing: the engines' figure is a lower bound)."""
    spent: dict[str, float] = {"engines": 0.0}
    for (role, pid), used in after.items():
        spent[role] = spent.get(role, 0.0) + used - before.get((role, pid), 0.0)
    gone = any(key[0] == "engines" and key not in after for key in before)
    return spent, gone


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


async def in_process_ms(root: Path, calls: int, run: GatewayRun) -> dict[str, float]:
    """p50 ms of the in-process work per call of each mix, with the shared embedder of ``run``."""
    socket = layout.runtime_dir(run.data_dir.resolve(), None) / "embedder.sock"
    wait_until(socket.exists, 60, "the embedder")
    async with in_process(root, socket) as call:
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
    write, read = statistics.median(times["remember"]), statistics.median(times["get_context"])
    return {"writes": write, "reads": read, "mixed": (write + read) / 2}
