"""A warm spare engine: started before it is needed, so a sleeping workspace wakes fast.

Importing the engine's libraries takes most of an engine's start (~0.8 s of ~0.9 s on a small
host). The spare is an engine process (``python -m engine --await-assignment``) that has done
that already and waits on stdin. When a workspace must start, the supervisor hands the spare
one JSON line naming its socket, directory and log file, then starts the next spare in the
background. The spare stays the gateway's own child, so it is watched and stopped like any
engine. If no spare is ready (two cold starts at once, or it died), the supervisor spawns an
engine the ordinary way.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
from anyio.abc import Process

from gateway.engines import procs


def assignment_line(socket: Path, workspace_dir: Path, log: Path) -> bytes:
    """What the spare reads on stdin to serve a workspace (``python -m engine --await-assignment``)."""
    return (json.dumps({"socket": str(socket), "dir": str(workspace_dir), "log": str(log)}) + "\n").encode()


class WarmSpare:
    def __init__(self, argv: tuple[str, ...], log: Path) -> None:
        self.argv = argv
        self.log = log
        self._proc: Process | None = None
        self._lock = anyio.Lock()
        self._closed = False  # closed for good: no spare is started after close()

    @property
    def ready(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The waiting spare's process id, when one is alive."""
        return self._proc.pid if self._proc is not None and self.ready else None

    async def fill(self) -> None:
        """Start a spare unless a live one is waiting."""
        async with self._lock:
            if self.ready or self._closed:
                return
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("ab") as log:
                self._proc = await anyio.open_process(
                    list(self.argv), stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True
                )

    async def take(self, socket: Path, workspace_dir: Path, log: Path) -> Process | None:
        """Hand the waiting spare its workspace; None when there is no live spare to hand it to."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None or proc.stdin is None:
            return None
        socket.unlink(missing_ok=True)
        try:
            await proc.stdin.send(assignment_line(socket, workspace_dir, log))
            await proc.stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await procs.kill(proc)
            return None
        return proc

    async def close(self, grace: float) -> None:
        """Stop the waiting spare, if any: end of input tells it it is not needed. A fill under
        way is waited for (its process is then stopped too), and none starts after this."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                self._closed = True
                proc, self._proc = self._proc, None
        if proc is not None:
            await procs.end_input(proc, grace)
