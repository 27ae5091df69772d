"""The engine supervisor (``gw:spawn``, ``gw:503``): one engine process per *active* workspace.

A workspace's engine is started on first use and health-checked before anything is forwarded;
stopped (SIGTERM) after ``engine_idle_timeout`` with nothing in flight; restarted with backoff when
it exits unasked; and the host never runs more than ``max_engines`` (idle ones are stopped first to
make room). When an engine cannot be had, :meth:`Supervisor.lease` raises a
:class:`~gateway.errors.WorkspaceUnavailable` and the caller forwards nothing.

A start forks the engine from the fork server's warm template when one is ready
(:mod:`gateway.engines.forkserver`), else hands the warm spare its workspace
(:mod:`gateway.engines.spare`, when the fork server is off), else spawns the engine cold.

Starts are queued (:mod:`gateway.engines.startq`): at most ``start_concurrency`` at once, first come
first served. A start runs beside its callers, not inside them: a caller waits at most
``start_timeout`` and then gets 503 ``engine_start_timeout`` with a ``Retry-After`` from the queue,
while the start carries on, so the retry finds the engine ready or further along. Only a start not
healthy after ``start_kill_timeout`` (stuck) is killed, and recorded as a failure like a crash.

Each workspace has a slot with a state machine, changed only on the event loop:

    STOPPED ─call─▶ QUEUED ─turn─▶ STARTING ─healthy─▶ RUNNING ─idle / cap / shutdown─▶ STOPPING ─▶ STOPPED
                      │ shutdown       │ exits / stuck / shutdown   │ exits unasked (crash)
                      ▼                ▼                            ▼
                   STOPPED          STOPPED (failure recorded)   STOPPED (failure recorded,
                                                                          restart after backoff)

A slot has at most one start (:class:`Start`), begun under the slot's lock, so concurrent first
calls start it once and all wait on it.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import TracebackType

import anyio
import httpx
from anyio.abc import TaskGroup

from gateway import logs
from gateway.engines import forkserver, policy, procs
from gateway.engines.forkserver import ForkedEngine, ForkServer
from gateway.engines.spare import WarmSpare
from gateway.engines.startq import StartQueue
from gateway.engines.wire import EngineTransport
from gateway.errors import (
    EngineCapacity,
    EngineCrashLoop,
    EngineStartFailed,
    EngineStartTimeout,
    WorkspaceNotFound,
    WorkspaceUnavailable,
)
from gateway.metrics import Metrics

EXIT_LOCKED = 3
# Idle connections to an engine are dropped after this long. The engine keeps them for much longer
# (docs/wire.md), so the gateway always gives up an idle connection first: when the two expiries
# were equal (5 s each), a busy host let the engine close a connection just as the gateway reused
# it, and the call failed with "Server disconnected without sending a response" (a 503).
ENGINE_KEEPALIVE_SECONDS = 30.0


#: Calls to an engine: 10 s to connect, write or wait for a pooled connection; no read timeout
#: (a stream of progress notifications may run long).
ENGINE_TIMEOUT = httpx.Timeout(10.0, read=None)


@dataclass(frozen=True)
class SupervisorConfig:
    engine_command: tuple[str, ...]
    data_dir: Path
    run_dir: Path
    idle_timeout: float
    start_timeout: float
    stop_timeout: float
    max_engines: int
    max_connections: int
    retry_after: float
    restart: policy.RestartPolicy
    embedder_socket: Path | None = None
    engine_settings_file: Path | None = None
    warm_spare: bool = True
    #: with ``warm_spare``: the warm engine is a fork server's template, forking every engine
    #: (where the host has pidfds), rather than a spare handed one workspace
    fork_server: bool = True
    import_max_unpacked_bytes: int | None = None  # passed as --import-max-bytes
    #: starts under way at once (more wait their turn in the queue)
    start_concurrency: int = 1
    #: a start not healthy after this long is stuck: it is killed (``start_timeout`` only ends a
    #: caller's wait)
    start_kill_timeout: float = 300.0


class State(enum.Enum):
    STOPPED = "stopped"
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"


@dataclass(eq=False)
class Slot:
    workspace_id: str
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    state: State = State.STOPPED
    proc: procs.Child | None = None
    client: httpx.AsyncClient | None = None
    #: the transport under ``client`` (one connection pool): the /mcp proxy sends through it directly
    transport: httpx.AsyncBaseTransport | None = None
    in_flight: int = 0
    last_used: float = 0.0
    failures: tuple[float, ...] = ()
    generation: int = 0
    streams: set[anyio.CancelScope] = field(default_factory=set)
    start: Start | None = None


@dataclass(eq=False)
class Start:
    """A slot's start, queued or under way. It runs in the supervisor's task group, beside the calls
    that wait for it (each for as long as it may); ``done`` is set when it has ended either way."""

    done: anyio.Event = field(default_factory=anyio.Event)
    error: WorkspaceUnavailable | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


@dataclass(frozen=True)
class Lease:
    """A running engine, held for the length of one request. ``transport`` is the one under
    ``client``: the /mcp proxy sends its already-built requests through it, without the client's
    per-request work (URL merging, cookies, auth and redirect handling) that it has no use for."""

    client: httpx.AsyncClient
    slot: Slot
    transport: httpx.AsyncBaseTransport


def _shared_flags(config: SupervisorConfig) -> list[str]:
    """The flags every engine gets, whichever way it starts: the node's embedder, settings, limits."""
    flags = ["--exit-with-parent"]
    if config.embedder_socket is not None:
        flags += ["--embedder-socket", str(config.embedder_socket)]
    if config.engine_settings_file is not None:
        flags += ["--settings", str(config.engine_settings_file)]
    if config.import_max_unpacked_bytes is not None:
        flags += ["--import-max-bytes", str(config.import_max_unpacked_bytes)]
    return flags


def engine_argv(config: SupervisorConfig, socket: Path, workspace_dir: Path) -> tuple[str, ...]:
    """A cold start's command line: the engine of one workspace."""
    return (
        *config.engine_command,
        "--socket",
        str(socket),
        "--dir",
        str(workspace_dir),
        *_shared_flags(config),
    )


def spare_argv(config: SupervisorConfig, mode: str = "--await-assignment") -> tuple[str, ...]:
    """The warm spare's command line (``mode`` ``--fork-server``: the fork server's)."""
    return (*config.engine_command, mode, *_shared_flags(config))


class Supervisor:
    def __init__(
        self,
        config: SupervisorConfig,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self._clock = clock
        self._slots: dict[str, Slot] = {}
        self._retired: set[str] = set()
        self._tg: TaskGroup | None = None
        self._log = logs.get()
        # node mode: raises unless this node holds the workspace's lease (gateway.cluster.router)
        self.admit: Callable[[str], Awaitable[None]] | None = None
        self._forks = (
            ForkServer(
                spare_argv(config, "--fork-server"),
                config.data_dir / "logs" / "forkserver.log",
                on_lost=self._fork_server_lost,
            )
            if config.warm_spare and config.fork_server and forkserver.supported()
            else None
        )
        self._spare = (
            WarmSpare(spare_argv(config), config.data_dir / "logs" / "spare.log")
            if config.warm_spare and self._forks is None
            else None
        )
        self._closing = False
        self.queue = StartQueue(config.start_concurrency, prior=config.retry_after, clock=clock)
        metrics.starts_queued.set_function(lambda: self.queue.depth)
        metrics.engines_starting.set_function(lambda: self.queue.starting)

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Supervisor:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._reaper)
        if self._forks is not None:
            await self._tg.start(self._forks.run)
            self._tg.start_soon(self._forks.fill)
        if self._spare is not None:
            self._tg.start_soon(self._spare.fill)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with anyio.CancelScope(shield=True):
            self._closing = True  # no start begins from here on
            await self._call_off_starts()
            await self.stop_all(reason="shutdown")
            if self._spare is not None:
                await self._spare.close(self.config.stop_timeout)
            if self._forks is not None:
                await self._forks.close(self.config.stop_timeout)
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(et, exc, tb)
        self._tg = None

    def spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` beside the engines, outliving the request that started it (an import the
        owner's browser may leave mid-way must still be seen through); cancelled at shutdown. A
        failure is logged, never spread to the engines."""
        assert self._tg is not None, "the supervisor is not running"

        async def guarded() -> None:
            try:
                await work()
            except Exception:
                self._log.exception("background work failed")

        self._tg.start_soon(guarded)

    def slot(self, workspace_id: str) -> Slot:
        found = self._slots.get(workspace_id)
        if found is None:
            found = self._slots[workspace_id] = Slot(workspace_id)
        return found

    def is_running(self, workspace_id: str) -> bool:
        found = self._slots.get(workspace_id)
        return found is not None and found.state is State.RUNNING

    def running(self) -> list[Slot]:
        return [s for s in self._slots.values() if s.state is State.RUNNING]

    def views(self) -> list[policy.SlotView]:
        return [
            policy.SlotView(
                s.workspace_id,
                running=s.state in (State.STARTING, State.RUNNING),
                in_flight=s.in_flight + (1 if s.state is State.STARTING else 0),
                last_used=s.last_used,
            )
            for s in self._slots.values()
        ]

    # -- leasing an engine -------------------------------------------------------------------

    @asynccontextmanager
    async def lease(self, workspace_id: str, *, counts_as_use: bool = True) -> AsyncIterator[Lease]:
        """A running engine for ``workspace_id``, started if needed. A lease that ``counts_as_use``
        keeps the engine from idling out while held; others (long-lived GET streams) do not, and
        are cancelled when the engine stops."""
        if self.admit is not None:
            await self.admit(workspace_id)
        slot = self.slot(workspace_id)
        if slot.state is not State.RUNNING:
            await self._ensure_running(slot)
        assert slot.client is not None and slot.transport is not None
        client, transport = slot.client, slot.transport
        slot.last_used = self._clock()
        if counts_as_use:
            slot.in_flight += 1
            try:
                yield Lease(client, slot, transport)
            finally:
                slot.in_flight -= 1
                slot.last_used = self._clock()
        else:
            with anyio.CancelScope() as scope:
                slot.streams.add(scope)
                try:
                    yield Lease(client, slot, transport)
                finally:
                    slot.streams.discard(scope)

    async def _ensure_running(self, slot: Slot, *, patience: float | None = None) -> None:
        """Return once ``slot``'s engine runs, starting it if none is starting. The caller waits at
        most ``patience`` seconds (default ``start_timeout``; ``math.inf``: for the outcome), then
        gets :class:`EngineStartTimeout` while the start carries on."""
        wait = self.config.start_timeout if patience is None else patience
        deadline = anyio.current_time() + wait
        while slot.state is not State.RUNNING:
            start = await self._begin_start(slot, wait)
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await start.done.wait()
            if not start.done.is_set():
                raise self._still_starting(slot)
            if slot.workspace_id in self._retired:  # erased while starting: its start was called off
                raise WorkspaceNotFound("this workspace has been erased")
            if start.error is not None:
                raise type(start.error)(str(start.error), retry_after=start.error.retry_after)

    async def _begin_start(self, slot: Slot, patience: float) -> Start:
        """The slot's start under way, or a new one queued (after any restart backoff)."""
        async with slot.lock:
            if slot.start is not None:
                return slot.start
            gate = policy.start_gate(self.config.restart, slot.failures, self._clock())
            if gate.verdict == "crash_loop":
                raise EngineCrashLoop(
                    "this workspace's engine keeps failing; it will be tried again later",
                    retry_after=gate.delay,
                )
            if gate.verdict == "wait":
                if gate.delay > patience:
                    raise EngineStartFailed(
                        "this workspace's engine failed recently and is backing off; try again later",
                        retry_after=gate.delay,
                    )
                await anyio.sleep(gate.delay)
            if slot.workspace_id in self._retired:
                raise WorkspaceNotFound("this workspace has been erased")
            if self._closing or self._tg is None:
                raise EngineStartFailed(
                    "the gateway is shutting down; try again shortly", retry_after=self.config.retry_after
                )
            start = slot.start = Start()
            slot.state = State.QUEUED
            self.queue.enqueue(slot.workspace_id)
            self._tg.start_soon(self._run_start, slot, start)
            return start

    def _still_starting(self, slot: Slot) -> EngineStartTimeout:
        wait = self.queue.retry_after(slot.workspace_id) or 1.0
        ahead = self.queue.ahead_of(slot.workspace_id)
        where = "is starting" if ahead is None else f"is queued to start ({ahead} ahead of it)"
        return EngineStartTimeout(
            f"this workspace's engine {where} and not ready yet; try again in {math.ceil(wait)} s",
            retry_after=wait,
        )

    async def _run_start(self, slot: Slot, start: Start) -> None:
        """One start, in the task group: wait for a turn, make room under the cap, spawn, wait healthy.
        Its outcome goes to ``start`` for the callers waiting on it."""
        try:
            with start.scope:
                async with self.queue.turn(slot.workspace_id):
                    ok, victim = policy.capacity_victim(self.views(), self.config.max_engines)
                    if not ok:
                        raise EngineCapacity(
                            "the host is running as many workspaces as it may and all are busy; "
                            "try again shortly",
                            retry_after=self.config.retry_after,
                        )
                    slot.state = State.STARTING
                    if victim is not None:
                        with anyio.CancelScope(shield=True):  # bounded by stop_timeout; never half-done
                            await self._stop_slot(self._slots[victim], reason="capacity")
                    await self._start(slot)
        except WorkspaceUnavailable as exc:
            start.error = exc
        except Exception:
            self._log.exception("engine start failed")
            start.error = EngineStartFailed(
                "the engine could not be started; try again", retry_after=self.config.retry_after
            )
        finally:
            self.queue.withdraw(slot.workspace_id)  # called off before its task began
            if slot.state is not State.RUNNING:
                slot.state, slot.proc = State.STOPPED, None
                if start.error is None:
                    start.error = EngineStartFailed(
                        "the engine's start was called off; try again", retry_after=self.config.retry_after
                    )
            slot.start = None
            start.done.set()

    async def _call_off_starts(self) -> None:
        """Cancel every queued or spawned start (a spawned engine is killed) and wait for them."""
        starts = [s.start for s in self._slots.values() if s.start is not None]
        for start in starts:
            start.scope.cancel()
        for start in starts:
            await start.done.wait()

    async def _start(self, slot: Slot) -> None:
        socket = self.config.run_dir / f"{slot.workspace_id}.sock"
        workspace_dir = self.config.data_dir / "workspaces" / slot.workspace_id
        workspace_dir.mkdir(parents=True, exist_ok=True)
        spec = procs.Spec(
            argv=engine_argv(self.config, socket, workspace_dir),
            socket=socket,
            log=self.config.data_dir / "logs" / f"{slot.workspace_id}.log",
        )
        started, log_from = self._clock(), procs.log_size(spec.log)
        try:
            # shielded: a process spawned as the start is cancelled must still be seen, and killed below
            with anyio.CancelScope(shield=True):
                warm, kind = await self._warm_start(slot, socket, workspace_dir, spec.log)
                proc: procs.Child = warm if warm is not None else await procs.spawn(spec)
        except OSError as exc:
            raise self._failed(slot, EngineStartFailed, f"the engine could not be spawned: {exc}") from exc
        slot.proc = proc
        try:
            with anyio.fail_after(self.config.start_kill_timeout):
                await procs.wait_healthy(proc, spec, log_from=log_from)
        except TimeoutError:
            await procs.kill(proc)
            logs.event(self._log, logging.WARNING, "engine.start_stuck", workspace=slot.workspace_id)
            raise self._failed(
                slot,
                EngineStartFailed,
                f"the engine did not answer within {self.config.start_kill_timeout:g} s and was stopped",
            ) from None
        except procs.ExitedEarly as exc:
            why = "another engine holds the workspace lock" if exc.returncode == EXIT_LOCKED else str(exc)
            logs.event(
                self._log,
                logging.WARNING,
                "engine.start_failed",
                workspace=slot.workspace_id,
                returncode=exc.returncode,
                tail=exc.tail[-500:],
            )
            raise self._failed(slot, EngineStartFailed, f"the engine could not start ({why})") from None
        except BaseException:
            await procs.kill(proc)
            raise
        slot.transport = EngineTransport(
            str(socket),
            max_connections=self.config.max_connections,
            keepalive_expiry=ENGINE_KEEPALIVE_SECONDS,
        )
        slot.client = httpx.AsyncClient(
            transport=slot.transport,
            base_url="http://localhost",
            timeout=ENGINE_TIMEOUT,
        )
        slot.proc, slot.state = proc, State.RUNNING
        slot.generation += 1
        slot.last_used = self._clock()
        elapsed = slot.last_used - started
        self.queue.record_start(elapsed)
        self.metrics.cold_starts.inc()
        self.metrics.starts_by_kind.labels(kind).inc()
        self.metrics.cold_start_seconds.observe(elapsed)
        self.metrics.engines_running.set(len(self.running()))
        logs.event(
            self._log,
            logging.INFO,
            "engine.start",
            workspace=slot.workspace_id,
            pid=proc.pid,
            kind=kind,
            seconds=round(elapsed, 4),
        )
        assert self._tg is not None, "use the supervisor as an async context manager"
        self._tg.start_soon(self._watch, slot, proc, slot.generation)

    async def _warm_start(
        self, slot: Slot, socket: Path, workspace_dir: Path, log: Path
    ) -> tuple[procs.Child | None, str]:
        """The engine forked from the fork server's template, or the warm spare handed the
        workspace; (None, "cold") when neither is to be had (the caller spawns the engine)."""
        if self._forks is not None:
            forked = await self._forks.fork(socket, workspace_dir, log)
            if isinstance(forked, ForkedEngine):
                return forked, "fork"
            logs.event(
                self._log, logging.INFO, "engine.fork_unavailable", workspace=slot.workspace_id, why=forked
            )
            self._refill_later()  # a template that is gone comes back once the starts are done
        elif self._spare is not None:
            taken = await self._spare.take(socket, workspace_dir, log)
            if taken is not None:
                self._refill_later()
                return taken, "spare"
        return None, "cold"

    def _refill_later(self) -> None:
        if self._tg is not None and not self._closing:
            self._tg.start_soon(self._refill)

    def _fork_server_lost(self) -> None:
        logs.event(self._log, logging.WARNING, "engine.fork_server_lost")
        self._refill_later()

    async def _refill(self) -> None:
        """Start the next spare (or fork server) once no start is queued or under way: one importing
        its libraries takes CPU from the starts a caller waits for."""
        await self.queue.idle()
        try:
            if self._forks is not None:
                await self._forks.fill()
            elif self._spare is not None:
                await self._spare.fill()
        except OSError as exc:
            logs.event(self._log, logging.WARNING, "engine.spare_failed", error=str(exc))

    def _failed(self, slot: Slot, kind: type[WorkspaceUnavailable], message: str) -> WorkspaceUnavailable:
        now = self._clock()
        slot.failures = (*policy.recent(slot.failures, now, self.config.restart.crash_loop_window), now)
        gate = policy.start_gate(self.config.restart, slot.failures, now)
        return kind(message, retry_after=max(self.config.retry_after, gate.delay))

    async def _watch(self, slot: Slot, proc: procs.Child, generation: int) -> None:
        """Wait for the engine to exit; an exit nobody asked for is a crash: restart after backoff."""
        returncode = await proc.wait()
        if slot.generation != generation or slot.state is not State.RUNNING:
            return  # an exit we asked for
        await self._discard(slot)
        now = self._clock()
        slot.failures = (*policy.recent(slot.failures, now, self.config.restart.crash_loop_window), now)
        self.metrics.engine_crashes.inc()
        logs.event(
            self._log,
            logging.WARNING,
            "engine.crash",
            workspace=slot.workspace_id,
            pid=proc.pid,
            returncode=returncode,
        )
        gate = policy.start_gate(self.config.restart, slot.failures, now)
        if gate.verdict == "crash_loop":
            logs.event(self._log, logging.ERROR, "engine.crash_loop", workspace=slot.workspace_id)
            return
        await anyio.sleep(gate.delay)
        try:  # a request may have restarted it meanwhile: then this returns at once
            await self._ensure_running(slot, patience=math.inf)
        except WorkspaceUnavailable as exc:
            logs.event(
                self._log,
                logging.WARNING,
                "engine.restart_failed",
                workspace=slot.workspace_id,
                code=exc.code,
            )

    async def _discard(self, slot: Slot) -> None:
        """Forget a slot's engine (already exited or being stopped): close streams and client."""
        for scope in list(slot.streams):
            scope.cancel()
        client, slot.client, slot.transport, slot.proc = slot.client, None, None, None
        slot.state = State.STOPPED
        self.metrics.engines_running.set(len(self.running()))
        if client is not None:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    # -- stopping ------------------------------------------------------------------------------

    async def _stop_slot(self, slot: Slot, *, reason: str, force: bool = False) -> None:
        """Stop a running engine with nothing in flight (unless ``force``: shutdown)."""
        if slot.state is not State.RUNNING or (slot.in_flight and not force):
            return
        slot.state = State.STOPPING
        proc = slot.proc
        async with slot.lock:
            if proc is None:  # pragma: no cover - RUNNING always has a process
                slot.state = State.STOPPED
                return
            for scope in list(slot.streams):
                scope.cancel()
            returncode = await procs.stop(proc, self.config.stop_timeout)
            await self._discard(slot)
            self.metrics.engine_stops.labels(reason).inc()
            logs.event(
                self._log,
                logging.INFO,
                "engine.stop",
                workspace=slot.workspace_id,
                pid=proc.pid,
                reason=reason,
                returncode=returncode,
            )

    async def retire(self, workspace_id: str, *, reason: str = "erase") -> None:
        """Stop the workspace's engine for good (its folder is about to be deleted): a start queued or
        under way is called off (a spawned engine is killed), the engine is stopped even with calls in
        flight, and it is never started again by this supervisor (a lease raises
        :class:`WorkspaceNotFound`)."""
        self._retired.add(workspace_id)
        slot = self._slots.get(workspace_id)
        if slot is None:
            return
        async with slot.lock:
            start = slot.start  # no new one begins
        if start is not None:
            start.scope.cancel()
            await start.done.wait()
        await self._stop_slot(slot, reason=reason, force=True)
        self._slots.pop(workspace_id, None)

    async def stop(self, workspace_id: str, *, reason: str) -> None:
        """Stop the workspace's engine now unless calls are in flight (the next call starts it afresh,
        reading everything again: after its store was replaced underneath it, say)."""
        slot = self._slots.get(workspace_id)
        if slot is not None:
            await self._stop_slot(slot, reason=reason)

    async def restart(self, workspace_id: str, *, reason: str = "settings") -> None:
        """Stop the workspace's engine so that the next call starts a fresh one, which reads its
        settings again. A start under way finishes first; calls in flight get the engine's own
        grace period to finish (SIGTERM). Nothing happens when no engine runs."""
        slot = self._slots.get(workspace_id)
        if slot is None:
            return
        async with slot.lock:
            start = slot.start
        if start is not None:
            await start.done.wait()
        await self._stop_slot(slot, reason=reason, force=True)

    async def stop_idle(self) -> list[str]:
        victims = policy.idle_victims(self.views(), self._clock(), self.config.idle_timeout)
        for workspace_id in victims:
            await self._stop_slot(self._slots[workspace_id], reason="idle")
        return victims

    async def stop_all(self, *, reason: str) -> None:
        """Stop every engine at once (each gets its own grace period, not one after another)."""
        async with anyio.create_task_group() as tg:
            for slot in list(self._slots.values()):
                tg.start_soon(partial(self._stop_slot, slot, reason=reason, force=True))

    async def _reaper(self) -> None:
        interval = min(15.0, max(0.02, self.config.idle_timeout / 5))
        while True:
            await anyio.sleep(interval)
            await self.stop_idle()

    # -- introspection -------------------------------------------------------------------------

    @property
    def spare_pid(self) -> int | None:
        return None if self._spare is None else self._spare.pid

    @property
    def is_fork_server_ready(self) -> bool:
        """Whether the next start forks its engine (a template is up and has warmed up)."""
        return self._forks is not None and self._forks.ready

    @property
    def fork_server_pid(self) -> int | None:
        """The fork server's template, while it is alive."""
        return None if self._forks is None else self._forks.pid

    def pids(self) -> dict[str, int]:
        return {s.workspace_id: s.proc.pid for s in self._slots.values() if s.proc is not None}

    def rss(self) -> dict[str, int]:
        found = {ws: procs.rss_bytes(pid) for ws, pid in self.pids().items()}
        return {ws: rss for ws, rss in found.items() if rss is not None}
