"""Harness for end-to-end tests: the real ``almanac`` CLI, a real gateway process on port 0, real
engine processes, and the real MCP client."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from bench.processes import workspace_of

ALMANAC = str(Path(sys.executable).parent / "almanac")
#: How long a starting gateway may take to print its banner (a loaded CI host starts several at once).
BANNER_TIMEOUT_S = 120


def wait_for(condition: Callable[[], bool], *, timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``condition`` until true; fail after ``timeout`` seconds (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (Linux /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Children of ``pid`` and, for a fork server among them, the engines it forked."""
    found = children(pid)
    return found + [
        forked for child in found if "--fork-server" in cmdline(child) for forked in children(child)
    ]


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class Gateway:
    proc: subprocess.Popen[str]
    data_dir: Path
    url: str
    reader: threading.Thread
    banner: list[str] = field(default_factory=list)
    cli_env: dict[str, str] = field(default_factory=dict)  # what admin commands share with serve

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"

    def cli(self, *args: str, stdin: str = "") -> str:
        result = subprocess.run(
            [ALMANAC, *args, "--data-dir", str(self.data_dir)],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(self.cli_env),
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def owner(self, email: str) -> None:
        self.cli("owner", "create", email)

    def token(self, email: str, name: str, *extra: str) -> str:
        return self.cli("token", "create", "--owner", email, "--name", name, *extra).strip()

    def workspace_dir(self, email: str, workspace: str = "default") -> Path:
        out = self.cli("workspace", "list", "--owner", email)
        for line in out.splitlines():
            ws_id, name = line.split("\t")[:2]
            if name == workspace:
                return self.data_dir / "workspaces" / ws_id
        raise AssertionError(f"no workspace {workspace}")

    def engines(self) -> dict[Path, int]:
        """Running engine processes, by workspace directory."""
        found: dict[Path, int] = {}
        for pid in descendants(self.proc.pid):
            served = workspace_of(pid) if "engine" in cmdline(pid) and alive(pid) else None
            if served is not None:  # a warm spare, or the fork server's template, holds no workspace
                found[Path(served)] = pid
        return found

    def metric(self, name: str) -> float:
        """A metric's value (summed over labels unless ``name`` names them, as ``x{a="b"}``)."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
        total = 0.0
        for line in text.splitlines():
            series, _, value = line.rpartition(" ")
            if series == name or ("{" not in name and series.startswith(name + "{")):
                total += float(value)
        return total

    def stop(self) -> None:
        engines = list(self.engines().values())
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hang is a bug; do not leak it
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.reader.join(timeout=10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        wait_for(lambda: not any(alive(pid) for pid in engines), what="engines to stop with the gateway")
        assert code == 0, f"almanac serve exited {code} on SIGTERM"


def clean_env(settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env.update(settings)
    return env


def start_gateway(
    data_dir: Path,
    log: Path,
    *,
    port: str = "0",
    command: Sequence[str] = (ALMANAC, "serve"),
    **settings: str,
) -> Gateway:
    """``almanac serve`` on ``port`` ("0": a free one; a gateway restarted on its data dir passes
    the port it had). ``command``: what is run in its place (given ``--port`` and ``--data-dir``)."""
    env = clean_env({f"ALMANAC_{k.upper()}": v for k, v in {"embedder": "false", **settings}.items()})
    with log.open("a") as stderr:
        proc = subprocess.Popen(
            [*command, "--port", port, "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    stdout = proc.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        try:
            banner = [lines.get(timeout=BANNER_TIMEOUT_S)]
        except queue.Empty:
            raise AssertionError(
                f"almanac serve printed no banner within {BANNER_TIMEOUT_S} s; its log: {log}"
            ) from None
        url = banner[0].split()[-1].removesuffix("/mcp")
        while True:
            try:
                banner.append(lines.get(timeout=5))
            except queue.Empty:
                break
            if banner[-1].startswith("Stop with"):
                break
        shared = {"ALMANAC_DATABASE_URL": settings["database_url"]} if "database_url" in settings else {}
        gateway = Gateway(proc, data_dir, url, reader, banner, shared)
        wait_for(lambda: _up(url), what="the gateway to answer /healthz")
    except BaseException:
        _kill_tree(proc)  # a gateway that did not come up must not outlive the test
        raise
    return gateway


def _kill_tree(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` and every process it started (engines, the warm spare or fork server, the
    embedder)."""
    for pid in descendants(proc.pid):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.kill()
    proc.wait()


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@asynccontextmanager
async def connect(
    gateway: Gateway, token: str, *, mode: str = "auto", headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """The real MCP client with a bearer token (and any extra ``headers``, e.g. forged ones)."""
    http = httpx2.AsyncClient(headers={**(headers or {}), "Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(gateway.mcp_url, http_client=http), mode=mode) as client:
        yield client


def data(result: CallToolResult) -> dict[str, Any]:
    """A tool's structured result (it must have succeeded)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))  # type: ignore[union-attr]


def refusal(result: CallToolResult) -> str:
    """A tool error's text (it must have been refused)."""
    assert result.is_error, f"expected a refusal, got {result.structured_content}"
    return " ".join(getattr(c, "text", "") for c in result.content)


def files_containing(directory: Path, needle: str) -> list[Path]:
    if not directory.exists():
        return []
    return [
        p
        for p in directory.rglob("*")
        if p.is_file() and ".index" not in p.parts and needle.encode() in p.read_bytes()
    ]
