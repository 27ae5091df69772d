"""The README's commands are the ones that work: they are run here as a user would run them."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
DEFAULT_URL = "http://127.0.0.1:8080/mcp"


def blocks(lang: str) -> list[str]:
    """The bodies of the README's fenced code blocks whose info string is ``lang`` ("" = plain)."""
    found: list[str] = []
    current: list[str] = []
    inside: str | None = None  # the info string of the block being read
    for line in README.splitlines(keepends=True):
        if line.startswith("```"):
            if inside is None:
                inside, current = line.strip()[3:], []
            else:
                if inside == lang:
                    found.append("".join(current))
                inside = None
        elif inside is not None:
            current.append(line)
    return found


def commands() -> list[str]:
    """Every line of every plain code block in the README."""
    return [line.strip() for block in blocks("") for line in block.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
    """`make run PORT=… DATA_DIR=…`, as the README says, on a free port with a temporary data folder."""
    port, data = free_port(), tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")}
    env["HOME"] = str(tmp_path / "home")  # nothing may land in the real per-user folder
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run", f"PORT={port}", f"DATA_DIR={data}"],
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
        assert url == f"http://127.0.0.1:{port}/mcp", url
        yield url, {**env, "ALMANAC_DATA_DIR": str(data)}
        assert (data / "control.db").is_file()
        assert not (tmp_path / "home" / ".local" / "share" / "almanac").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()


def _connect_and_remember(url: str, headers: dict[str, str], statement: str) -> dict[str, Any]:
    async def use() -> dict[str, Any]:
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool("remember", {"statement": statement})
            assert not result.is_error, result.content
            return result.structured_content or {}

    return anyio.run(use)


def _client_configs(token: str, url: str) -> dict[str, tuple[str, dict[str, str]]]:
    """Each client setup of the README, read as that client would: the URL and headers it sends."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    (claude,) = [c for c in commands() if c.startswith("claude mcp add")]
    argv = shlex.split(claude.replace("<token>", token))
    assert argv[:4] == ["claude", "mcp", "add", "--transport"] and argv[4] == "http"
    name, value = argv[argv.index("--header") + 1].split(": ", 1)
    found["claude code"] = (argv[argv.index("--header") - 1], {name: value})
    for block in blocks("json"):
        config = json.loads(block.replace("<token>", token))
        if "mcpServers" in config and "url" in config["mcpServers"]["almanac"]:  # Cursor
            server = config["mcpServers"]["almanac"]
            found["cursor"] = (server["url"], server["headers"])
        elif "servers" in config:  # VS Code, after it asks for the input
            server = config["servers"]["almanac"]
            assert server["type"] == "http" and config["inputs"][0]["id"] == "almanac-token"
            headers = {k: v.replace("${input:almanac-token}", token) for k, v in server["headers"].items()}
            found["vs code"] = (server["url"], headers)
        else:  # Claude Desktop through mcp-remote: the header comes from its env
            server = config["mcpServers"]["almanac"]
            args, env = server["args"], server["env"]
            header = args[args.index("--header") + 1].replace("${ALMANAC_AUTH}", env["ALMANAC_AUTH"])
            name, value = header.split(":", 1)
            found["claude desktop"] = (args[args.index("--header") - 1], {name: value})
    assert set(found) == {"claude code", "cursor", "vs code", "claude desktop"}
    for where, _ in found.values():
        assert where == DEFAULT_URL
    return {k: (url, h) for k, (_, h) in found.items()}


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

    for client, (at, headers) in _client_configs(token, url).items():
        receipt = _connect_and_remember(at, headers, f"connected from the README's {client} setup")
        assert (receipt["action"], receipt["source"], receipt["source_verified"]) == (
            "store",
            "Claude Code on laptop",
            True,
        ), client

    (snippet,) = blocks("python")
    result = subprocess.run(
        [sys.executable, "-c", snippet],
        env={**env, "ALMANAC_URL": url, "ALMANAC_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "'action': 'store'" in result.stdout and "Almanac is connected" in result.stdout


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
