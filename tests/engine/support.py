"""Helpers for driving a real engine: its files, its processes, the real mcp client."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from bench.processes import accepting
from engine.store.layout import LOCK_NAME


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of a workspace's store, by relative path (not the lock, not derived dot-folders)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME and not p.relative_to(root).parts[0].startswith(".")
    }


def engine_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine", *args]


def wait_healthy(sock: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Poll (bounded) until the engine's socket accepts and /healthz answers 200."""
    deadline = time.monotonic() + timeout
    while not accepting(sock):
        if proc.poll() is not None:
            raise RuntimeError(f"engine exited with {proc.returncode} before it was healthy")
        if time.monotonic() > deadline:
            raise TimeoutError(f"engine on {sock} not healthy within {timeout}s")
        time.sleep(0.02)
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=5.0) as http:
        assert http.get("http://localhost/healthz").status_code == 200


@contextlib.contextmanager
def socket_engine(workspace: Path, sock: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(engine_command("--socket", str(sock), "--dir", str(workspace), *extra))
    try:
        wait_healthy(sock, proc)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.asynccontextmanager
async def socket_client(
    sock: Path, headers: dict[str, str] | None = None, mode: Any = "auto"
) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(sock)), headers=headers or {})
    async with (
        http,
        Client(streamable_http_client("http://localhost/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def stdio_client(workspace: Path, mode: Any = "auto") -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engine", "--stdio", "--dir", str(workspace)]
    )
    return Client(params, mode=mode)
