"""The README's commands are the ones that work: they are run here as a user would run them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent


def commands() -> list[str]:
    """Every line of every plain code block in the README."""
    blocks = re.findall(r"^```\n(.*?)^```", README, flags=re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


@pytest.mark.req("run:two-commands")
def test_ci_runs_exactly_the_readme_test_command() -> None:
    assert "make run" in commands() and "make test" in commands()
    script = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert script[-1] == "make test"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """`make run`, as the README says, with its data in a temporary folder and port 0."""
    env = {**os.environ, "ALMANAC_DATA_DIR": str(tmp_path / "data"), "ALMANAC_PORT": "0"}
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline().decode()
            if not line and proc.poll() is not None:
                raise AssertionError(f"make run exited with {proc.returncode}")
            found = re.search(r"serving MCP at (http://\S+/mcp)", line)
            url = found.group(1) if found else None
        assert url, "make run printed no MCP URL"
        yield url, env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.req("run:two-commands")
@pytest.mark.req("run:cli")
def test_make_run_serves_and_the_readme_connect_steps_work(served: tuple[str, dict[str, str]]) -> None:
    url, env = served
    assert httpx.get(url.removesuffix("/mcp") + "/healthz", timeout=10).status_code == 200
    steps = [c for c in commands() if c.startswith(".venv/bin/almanac ")]
    assert len(steps) == 2
    outputs = [
        subprocess.run(
            step.replace(".venv/bin/almanac", str(BIN / "almanac"), 1),
            shell=True,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=True,
        ).stdout
        for step in steps
    ]
    token = outputs[1].strip()
    assert token and "\n" not in token

    async def use() -> dict[str, object]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool("remember", {"statement": "the README works"})
            assert not result.is_error, result.content
            return result.structured_content or {}

    receipt = anyio.run(use)
    assert (receipt["action"], receipt["source"], receipt["source_verified"]) == (
        "store",
        "Claude Code on laptop",
        True,
    )


@pytest.mark.req("engine:mcp")
def test_the_readme_stdio_command_serves_a_local_user(tmp_path: Path) -> None:
    (line,) = [c for c in commands() if "--stdio" in c]
    argv = (
        line.replace(".venv/bin/python", sys.executable).replace("~/almanac", str(tmp_path / "mem")).split()
    )

    async def use() -> object:
        async with Client(StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))) as client:
            return (await client.call_tool("remember", {"statement": "local"})).structured_content

    assert anyio.run(use) is not None
    assert (tmp_path / "mem" / "notes").is_dir()
