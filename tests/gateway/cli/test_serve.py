"""``almanac serve`` refuses to start with one line that says what to do (run:two-commands)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.logs import TextFormatter, resolve_format

ALMANAC = str(Path(sys.executable).parent / "almanac")


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env["ALMANAC_EMBEDDER"] = "false"
    return subprocess.run(
        [ALMANAC, "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "serving MCP" not in result.stdout


@pytest.mark.req("run:two-commands")
def test_a_busy_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--port", str(port), "--data-dir", str(tmp_path / "data"))
    assert_one_line(result, f"port {port}", "already in use", "--port")


@pytest.mark.req("run:two-commands")
def test_a_data_directory_that_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    result = serve("--port", "0", "--data-dir", str(blocker / "data"))
    assert_one_line(result, "cannot write to the data directory", "--data-dir")


@pytest.mark.req("run:two-commands")
def test_a_corrupt_control_database(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "control.db").write_bytes(b"garbage" * 1000)
    result = serve("--port", "0", "--data-dir", str(data))
    assert_one_line(result, "not a usable Almanac control database", "backup")
    assert (data / "control.db").read_bytes() == b"garbage" * 1000


@pytest.mark.req("run:two-commands")
def test_a_missing_control_database_beside_workspaces(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "workspaces" / "ws_0123456789abcdef" / "notes").mkdir(parents=True)
    result = serve("--port", "0", "--data-dir", str(data))
    assert_one_line(result, "holds workspaces but no control.db", "backup")
    assert not (data / "control.db").exists()


def test_logs_are_text_on_a_terminal_and_json_otherwise() -> None:
    assert resolve_format("auto", is_terminal=True) == "text"
    assert resolve_format("auto", is_terminal=False) == "json"
    assert resolve_format("json", is_terminal=True) == "json"
    record = logging.makeLogRecord(
        {
            "msg": "engine.start",
            "levelname": "INFO",
            "event": "engine.start",
            "workspace": "ws_1",
            "why": "a b",
        }
    )
    line = TextFormatter().format(record)
    assert line.endswith('info    engine.start workspace=ws_1 why="a b"')
