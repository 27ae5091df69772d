"""The fork server: one warm engine template that forks each workspace's engine (Linux).

A warm spare serves one start, then the next spare imports everything again. The fork server
(``python -m engine --fork-server``, a gateway child started like the spare) imports once and then
``fork()``s an engine per start: the child shares the template's warmed memory and only opens its
workspace. The wire (``engine/forkserver.py``): the gateway writes the spare's assignment line
(:func:`gateway.engines.spare.assignment_line`) on the template's stdin; the template answers
``{"pid": N}`` (or ``{"error": …}``) and later ``{"exit": N, "returncode": R}`` for each engine,
after announcing ``{"ready": true}`` once warm.

A forked engine is the template's child, not the gateway's, so the gateway holds a pidfd to
signal it (never a pid that may have been reused) and learns its exit from the template. When the
template dies, its engines go on (each watches the gateway, not the template); the gateway then
learns their exits from their pidfds, without a status (-1). Until a template is ready again,
starts are cold (the supervisor refills it off the hot path). Without ``os.pidfd_open`` (not
Linux) there is no fork server.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from gateway.engines import procs
from gateway.engines.spare import assignment_line

#: The longest line the template may send.
MAX_LINE = 64 * 1024
#: How long a fork may take to be answered before the template is deemed stuck (and killed).
REPLY_TIMEOUT = 10.0
#: An engine whose exit status is not known (its template died before reporting it).
UNKNOWN_STATUS = -1
#: How often a wait for a forked engine's exit looks at its pidfd, and how long after it exited
#: the wait gives the template to report its status before settling for :data:`UNKNOWN_STATUS`.
#: Every running engine has a wait (the supervisor's watch) for its whole life, so the look is
#: rare: the template's report wakes a wait at once; the pidfd is only the fallback.
POLL_S = 0.5
STATUS_GRACE_S = 1.0


def supported() -> bool:
    """Whether this host can run a fork server (pidfds: Linux 5.3 or later)."""
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


class ForkedEngine:
    """An engine the template forked, as the supervisor sees a process: ``pid``, ``returncode``,
    ``wait()``, and :meth:`signal` through its pidfd."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._exited = anyio.Event()
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # exited and reaped already: the template's report follows
            self._pidfd = None

    def signal(self, sig: int) -> None:
        if self._pidfd is not None and self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    async def wait(self) -> int:
        """Its exit status, once it has exited: the template's report, or — when the template is
        gone or never reports it — :data:`UNKNOWN_STATUS` a moment after its pidfd says it exited.
        Polled, not registered with the event loop: it holds in a shielded scope (a stop) and in
        a task group being cancelled (a shutdown) alike, and any number of tasks may wait."""
        gone_at: float | None = None
        while self.returncode is None:
            with anyio.move_on_after(POLL_S):
                await self._exited.wait()
            if self.returncode is None and self._gone():
                gone_at = gone_at if gone_at is not None else anyio.current_time()
                if anyio.current_time() - gone_at >= STATUS_GRACE_S:
                    self.exited(UNKNOWN_STATUS)
        return self.returncode

    def _gone(self) -> bool:
        """Whether the process has exited, by its pidfd (readable once it has), without waiting."""
        if self._pidfd is None:
            return True  # it had exited before its pidfd could be opened
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(0))

    def exited(self, returncode: int) -> None:
        if self.returncode is not None:
            return
        self.returncode = returncode
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self._exited.set()


class ForkServer:
    """The gateway's side of one template at a time: start it, fork from it, watch its engines."""

    def __init__(
        self,
        argv: tuple[str, ...],
        log: Path,
        *,
        on_lost: Callable[[], None] = lambda: None,
        reply_timeout: float = REPLY_TIMEOUT,
    ) -> None:
        self.argv = argv
        self.log = log
        self.reply_timeout = reply_timeout
        self.on_lost = on_lost  # called when a template that was ready dies unasked
        self._proc: Process | None = None
        self._ready = False
        self._engines: dict[int, ForkedEngine] = {}
        self._pending: MemoryObjectReceiveStream[ForkedEngine | str] | None = None
        self._lock = anyio.Lock()  # one fork at a time, and no fork while a template starts
        self._closed = False
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def ready(self) -> bool:
        return self._ready and self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The template's process id while it is alive."""
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the task group the template's reader runs in (until cancelled: the supervisor's)."""
        async with anyio.create_task_group() as self._tg:
            task_status.started()
            await anyio.sleep_forever()

    async def fill(self) -> None:
        """Start a template unless one is alive (it announces when it is ready)."""
        async with self._lock:
            if self.pid is not None or self._closed or self._tg is None:
                return
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("ab") as log:
                proc = await anyio.open_process(
                    list(self.argv),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    start_new_session=True,
                )
            self._proc, self._ready = proc, False
            if self._pending is not None:
                self._pending.close()
            send, self._pending = anyio.create_memory_object_stream[ForkedEngine | str](16)
            self._tg.start_soon(self._read, proc, send)

    async def fork(self, socket: Path, workspace_dir: Path, log: Path) -> ForkedEngine | str:
        """Fork an engine for a workspace from the ready template; a reason (str) when it cannot,
        and the caller starts the engine another way."""
        async with self._lock:
            proc, pending = self._proc, self._pending
            if not self.ready or proc is None or proc.stdin is None or pending is None:
                return "no fork server is ready"
            socket.unlink(missing_ok=True)
            try:
                with anyio.fail_after(self.reply_timeout):
                    await proc.stdin.send(assignment_line(socket, workspace_dir, log))
                    reply = await pending.receive()
            except TimeoutError:
                await procs.kill(proc)
                return f"the fork server did not answer within {self.reply_timeout:g} s and was stopped"
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
                return "the fork server is gone"
            return reply

    async def _read(self, proc: Process, replies: MemoryObjectSendStream[ForkedEngine | str]) -> None:
        """Read the template's replies until it ends; then its engines are watched on their own."""
        assert proc.stdout is not None
        lines = BufferedByteReceiveStream(proc.stdout)
        try:
            while True:
                message = json.loads(await lines.receive_until(b"\n", MAX_LINE))
                if not isinstance(message, dict):
                    raise ValueError(f"not a fork server's reply: {message!r}")
                if "exit" in message:
                    engine = self._engines.pop(int(message["exit"]), None)
                    if engine is not None:
                        engine.exited(int(message["returncode"]))
                elif "pid" in message:
                    engine = self._engines[int(message["pid"])] = ForkedEngine(int(message["pid"]))
                    await replies.send(engine)
                elif "error" in message:
                    await replies.send(str(message["error"]))
                elif message.get("ready"):
                    self._ready = True
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.BrokenResourceError):
            pass
        except (ValueError, KeyError, TypeError):  # not the template's wire: it is not to be trusted
            await procs.kill(proc)
        finally:
            was_ready, self._ready = self._ready, False
            with anyio.CancelScope(shield=True):
                await replies.aclose()
                await procs.kill(proc)
                self._engines = {}  # their waits see them exit on their pidfds (ForkedEngine.wait)
                if was_ready and not self._closed:
                    self.on_lost()

    async def close(self, grace: float) -> None:
        """Stop the template (end of input), if any; none starts after this. Its engines are the
        supervisor's to stop (before this)."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                self._closed = True
                proc, self._proc = self._proc, None
                if self._pending is not None:
                    self._pending.close()
            if proc is not None:
                await procs.end_input(proc, grace)
