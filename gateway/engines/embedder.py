"""The shared embedder service (``embed:local``): one model per host, not one per engine.

The gateway starts ``python -m engine.embed --socket PATH`` once, keeps it running (restarting it
with backoff if it exits) and passes ``--embedder-socket PATH`` to every engine it spawns. Engines
start whether or not the embedder is up yet: embedding is off the write path, so until it answers
they answer keyword-only.
"""

from __future__ import annotations

import logging
import time
from typing import Literal

import anyio
from anyio.abc import Process

from gateway import logs
from gateway.engines import policy, procs

Status = Literal["starting", "ready", "failed", "stopped"]


class EmbedderService:
    def __init__(self, spec: procs.Spec, *, start_timeout: float, restart: policy.RestartPolicy) -> None:
        self.spec = spec
        self.start_timeout = start_timeout
        self.restart = restart
        self.status: Status = "stopped"
        self.detail = ""
        self.proc: Process | None = None
        self._log = logs.get()

    async def run(self) -> None:
        """Keep the service up until cancelled; the process is stopped on the way out."""
        failures: tuple[float, ...] = ()
        try:
            while True:
                gate = policy.start_gate(self.restart, failures, time.monotonic())
                if gate.verdict == "crash_loop":
                    self.status = "failed"
                    logs.event(self._log, logging.ERROR, "embedder.crash_loop", detail=self.detail)
                    await anyio.sleep(gate.delay)
                    continue
                await anyio.sleep(gate.delay)
                if await self._run_once():
                    return
                now = time.monotonic()
                failures = (*policy.recent(failures, now, self.restart.crash_loop_window), now)
        finally:
            with anyio.CancelScope(shield=True):
                if self.proc is not None:
                    await procs.stop(self.proc, grace=5.0)
                self.status, self.proc = "stopped", None

    async def _run_once(self) -> bool:
        """Start the service and wait for it to exit. True when it exited cleanly (status 0)."""
        self.status = "starting"
        try:
            self.proc = await procs.spawn(self.spec)
        except OSError as exc:
            self.status, self.detail = "failed", f"could not be spawned: {exc}"
            logs.event(self._log, logging.ERROR, "embedder.start_failed", detail=self.detail)
            return False
        try:
            with anyio.fail_after(self.start_timeout):
                await procs.wait_healthy(self.proc, self.spec)
        except TimeoutError:
            await procs.kill(self.proc)
            self.status, self.detail = "failed", f"did not answer within {self.start_timeout:g} s"
            logs.event(self._log, logging.ERROR, "embedder.start_failed", detail=self.detail)
            return False
        except procs.ExitedEarly as exc:
            self.status, self.detail = "failed", f"{exc}: {exc.tail[-300:]}"
            logs.event(self._log, logging.ERROR, "embedder.start_failed", detail=self.detail)
            return False
        self.status, self.detail = "ready", ""
        logs.event(self._log, logging.INFO, "embedder.start", pid=self.proc.pid)
        returncode = await self.proc.wait()
        self.proc = None
        if returncode == 0:
            self.status = "stopped"
            return True
        self.status, self.detail = "failed", f"exited with status {returncode}"
        logs.event(self._log, logging.WARNING, "embedder.crash", returncode=returncode)
        return False
