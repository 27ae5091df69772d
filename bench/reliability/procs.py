"""The real processes the harnesses run and kill: a lone engine on its socket, and a gateway.

Both are started the way they run in production (``python -m engine --socket``, ``almanac serve``
on port 0) and killed with SIGKILL, never asked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from mcp import Client

from bench.processes import Served, client_for, engine_children, seed_owners, serve, wait_engine, wait_until
from gateway import layout


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class LoneEngine:
    """``python -m engine --socket`` on one workspace directory, no gateway."""

    root: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def socket(self) -> Path:
        return self.root / "engine.sock"

    def start(self) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "engine", "--socket", str(self.socket), "--dir", str(self.workspace)]
        with (self.root / "engine.log").open("ab") as log:
            self.proc = subprocess.Popen([*argv, "--embedding-provider", "off"], stdout=log, stderr=log)
        wait_engine(self.socket, timeout=120)  # a busy host; after a kill the index also catches up

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def close(self) -> None:
        """Kill the engine if it still runs (after a failure: leave no process behind)."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill()

    def connect(self) -> AbstractAsyncContextManager[Client]:
        return client_for("http://localhost/mcp", uds=str(self.socket))


@dataclass
class GatewayRun:
    """``almanac serve`` over one data directory, restartable on the same data (a new port each time)."""

    root: Path
    settings: dict[str, str] = field(default_factory=dict)
    served: Served | None = None
    tokens: dict[str, str] = field(default_factory=dict)  # token -> workspace id

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        assert self.served is not None
        return self.served.url

    def seed(self, count: int, prefix: str) -> list[str]:
        made = seed_owners(self.data_dir, count, prefix)
        self.tokens.update(made)
        return list(made)

    def start(self) -> None:
        self.served = serve(self.data_dir, self.root / "gateway.log", {"embedder": "false", **self.settings})

    def workspace(self, token: str) -> Path:
        return layout.workspace_dir(self.data_dir.resolve(), self.tokens[token])

    def engine_pid(self, token: str) -> int | None:
        assert self.served is not None
        return engine_children(self.served.proc.pid).get(str(self.workspace(token)))

    def wait_engine(self, token: str, *, other_than: int | None = None, timeout: float = 60) -> int:
        def found() -> bool:
            pid = self.engine_pid(token)
            return pid is not None and pid != other_than

        wait_until(found, timeout, "the workspace's engine")
        pid = self.engine_pid(token)
        assert pid is not None
        return pid

    def kill_engine(self, token: str) -> int:
        pid = self.wait_engine(token)
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill(self) -> list[int]:
        """SIGKILL the gateway itself; returns its engines' pids (left to notice on their own)."""
        assert self.served is not None
        engines = [p for name, p in engine_children(self.served.proc.pid).items() if name != "embedder"]
        self.served.proc.send_signal(signal.SIGKILL)
        self.served.proc.wait(timeout=30)
        return engines

    def stop(self) -> int:
        assert self.served is not None
        engines = list(engine_children(self.served.proc.pid).values())
        self.served.proc.send_signal(signal.SIGTERM)
        code = self.served.proc.wait(timeout=60)
        wait_until(lambda: not any(_alive(p) for p in engines), 30, "the engines to stop with the gateway")
        return code

    def connect(self, token: str) -> AbstractAsyncContextManager[Client]:
        return client_for(self.url + "/mcp", token=token)

    def metrics(self) -> str:
        return httpx2.get(self.url + "/metrics", timeout=10).text


def wait_gone(pids: list[int], timeout: float = 30) -> None:
    wait_until(lambda: not any(_alive(p) for p in pids), timeout, "orphaned engines to exit")
