"""Child processes on a Unix socket: spawn, wait for ``GET /healthz``, stop (a thin I/O shell).

Used for workspace engines and for the shared embedder service. Children run in their own session
(so a Ctrl-C at the terminal reaches only the gateway, which then stops them in order), with stdin
closed and stdout/stderr appended to a log file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio
import httpx
from anyio.abc import Process

_POLL_INTERVAL = 0.01
_TAIL_BYTES = 2000


class ExitedEarly(Exception):
    """The child exited before it became healthy."""

    def __init__(self, returncode: int, tail: str) -> None:
        super().__init__(f"exited with status {returncode}")
        self.returncode = returncode
        self.tail = tail


class Child(Protocol):
    """An engine process as the supervisor watches it: its own child (:class:`anyio.abc.Process`)
    or one the fork server forked (``gateway.engines.forkserver.ForkedEngine``)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


@runtime_checkable
class Signalled(Protocol):
    """A process signalled through a handle of its own (a pidfd), not by its pid."""

    def signal(self, sig: int) -> None: ...


@dataclass(frozen=True)
class Spec:
    argv: tuple[str, ...]
    socket: Path
    log: Path


async def spawn(spec: Spec) -> Process:
    """Start the child; a stale socket file from an earlier run is removed first."""
    spec.socket.unlink(missing_ok=True)
    spec.log.parent.mkdir(parents=True, exist_ok=True)
    with spec.log.open("ab") as log:
        return await anyio.open_process(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_tail(path: Path, since: int = 0) -> str:
    """The end of a log file, from no earlier than byte ``since`` (this run's output only)."""
    try:
        with path.open("rb") as f:
            f.seek(max(since, path.stat().st_size - _TAIL_BYTES))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


async def wait_healthy(proc: Child, spec: Spec, *, log_from: int = 0) -> None:
    """Poll ``GET /healthz`` on the socket until it answers 200 (the caller bounds the wait).

    Raises :class:`ExitedEarly` as soon as the child exits."""
    # No TLS on a Unix socket: without verify=False, httpx loads the system's CA certificates here,
    # on the event loop, for every start (the gateway stands still meanwhile, a burst of starts long)
    transport = httpx.AsyncHTTPTransport(uds=str(spec.socket), verify=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=2.0) as client:
        while True:
            if proc.returncode is not None:
                raise ExitedEarly(proc.returncode, log_tail(spec.log, log_from))
            if spec.socket.exists():
                try:
                    response = await client.get("/healthz")
                    if response.status_code == 200:
                        return
                except httpx.TransportError:
                    pass
            await anyio.sleep(_POLL_INTERVAL)


async def stop(proc: Child, grace: float) -> int:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. Returns the exit status."""
    if proc.returncode is None:
        _signal(proc, signal.SIGTERM)
        with anyio.move_on_after(grace):
            await proc.wait()
        if proc.returncode is None:
            _signal(proc, signal.SIGKILL)
    with anyio.CancelScope(shield=True):
        await proc.wait()
    return proc.returncode if proc.returncode is not None else -1


async def kill(proc: Child) -> int:
    if proc.returncode is None:
        _signal(proc, signal.SIGKILL)
    with anyio.CancelScope(shield=True):
        await proc.wait()
    return proc.returncode if proc.returncode is not None else -1


async def end_input(proc: Process, grace: float) -> None:
    """Stop a warm engine that reads its work on stdin (the spare, the fork server's template):
    end of input tells it it is not needed; killed if it has not exited within ``grace`` seconds."""
    if proc.stdin is not None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await proc.stdin.aclose()
    with anyio.move_on_after(grace):
        await proc.wait()
    await kill(proc)


def _signal(proc: Child, sig: signal.Signals) -> None:
    if isinstance(proc, Signalled):
        proc.signal(sig)
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)


def rss_bytes(pid: int) -> int | None:
    """Resident set size of a process (Linux ``/proc``), or None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None
