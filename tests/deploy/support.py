"""Shared by the deployment tests: the real tools' paths, a free port, waiting for /healthz."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.gateway.e2e import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One of the validators installed with the dev extra (hadolint, check-jsonschema, ...)."""
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


@contextmanager
def running(
    argv: Sequence[str], env: Mapping[str, str], port: int, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server command, wait until it answers /healthz on ``port``, stop it (SIGTERM) after."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(argv), env=dict(env), stdout=out, stderr=subprocess.STDOUT, cwd=log.parent
        )
    try:
        wait_for(lambda: healthy(port) or proc.poll() is not None, timeout=120, what="/healthz")
        assert proc.poll() is None, log.read_text(encoding="utf-8")
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=60)
