"""``--exit-with-parent``: an engine whose gateway was killed outright stops on its own (``rel:kill``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from bench.processes import accepting
from tests.engine.support import engine_command, socket_client, wait_healthy


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _until(condition: object, what: str, timeout: float = 30.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


async def _write(sock: Path, text: str) -> str:
    async with socket_client(sock) as client:
        result = await client.call_tool("remember", {"statement": text})
        return str(result.structured_content["id"])


def _parent_of_engine(*argv: str) -> tuple[subprocess.Popen[str], int]:
    """A stand-in gateway: a process that starts the engine, prints its pid and waits."""
    code = "import subprocess, sys; p = subprocess.Popen(sys.argv[1:]); print(p.pid, flush=True); input()"
    parent = subprocess.Popen([sys.executable, "-c", code, *argv], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


@pytest.mark.req("rel:kill")
def test_an_engine_stops_cleanly_when_its_parent_is_killed(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    argv = ("--socket", str(sock), "--dir", str(ws), "--embedding-provider", "off")
    parent, engine = _parent_of_engine(*engine_command(*argv, "--exit-with-parent"))
    try:
        _until(lambda: accepting(sock), "the engine's socket", timeout=60)
        written = anyio.run(_write, sock, "written before the gateway died")
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        for pipe in (parent.stdin, parent.stdout):
            assert pipe is not None
            pipe.close()
        _until(lambda: not _alive(engine), "the orphaned engine to stop")
    finally:
        if _alive(engine):  # pragma: no cover - only when the test fails
            os.kill(engine, signal.SIGKILL)
    assert not sock.exists()  # a clean stop removes its socket
    # The workspace lock is free: a new engine serves it, with the write.
    proc = subprocess.Popen(
        engine_command("--socket", str(sock), "--dir", str(ws), "--embedding-provider", "off")
    )
    try:
        wait_healthy(sock, proc, timeout=60)
        assert anyio.run(_write, sock, "written after") != written
        assert any(written in p.read_text() for p in (ws / "notes").rglob("*.md"))
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


@pytest.mark.req("engine:mcp")
def test_watching_the_parent_is_asked_for_by_a_flag() -> None:
    from engine.server import parse_args

    assert parse_args(["--socket", "s", "--dir", "d"]).exit_with_parent is False
    assert parse_args(["--socket", "s", "--dir", "d", "--exit-with-parent"]).exit_with_parent is True
