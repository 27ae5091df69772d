"""The example host (examples/chat_loop.py) end to end: a real gateway, real engines, a real
subprocess, and a local fake OpenAI-compatible model server (host:turn-loop)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from almanac.host import Endpoint, HostSettings, MemoryProvider, openai_chat
from almanac.host.settings import NAMES
from tests.almanac.host.fake_chat import running_fake_chat
from tests.gateway.e2e import Gateway, clean_env, files_containing, start_gateway, wait_for

pytestmark = pytest.mark.req("host:turn-loop")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "chat_loop.py"
SYSTEM = "You are a helpful assistant. Answer briefly."
ADA = "ada@example.com"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    gw = start_gateway(tmp_path / "data", tmp_path / "gateway.log")
    try:
        gw.owner(ADA)
        yield gw
    finally:
        gw.stop()


def run(base_url: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *argv, "--model-url", base_url, "--model", "small"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(env or {}),
    )


def host(gateway: Gateway, token: str, base_url: str, *configs: str) -> subprocess.Popen[str]:
    return run(base_url, *configs, "--almanac-url", gateway.mcp_url, env={"ALMANAC_TOKEN": token})


def header(proc: subprocess.Popen[str]) -> list[str]:
    """What the example prints at start, up to its ``---`` line."""
    assert proc.stdout is not None
    lines: list[str] = []
    while (line := proc.stdout.readline()) and line.strip() != "---":
        lines.append(line.rstrip())
    return lines


def config(path: Path, data: dict[str, object]) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def context(gateway: Gateway, token: str, query: str) -> str:
    """The workspace's context for ``query`` over REST, as the owner's connection sees it."""
    reply = httpx.post(
        gateway.url + "/api/v1/context",
        json={"query": query},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    reply.raise_for_status()
    return reply.text


def say(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def finish(proc: subprocess.Popen[str]) -> str:
    """Close the conversation; what the example wrote to stderr."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.close()
    try:
        assert proc.wait(timeout=60) == 0
        return proc.stderr.read()
    finally:
        proc.stdout.close()
        proc.stderr.close()


def test_a_fact_saved_after_one_turn_is_in_the_next_turns_prompt(gateway: Gateway, tmp_path: Path) -> None:
    token = gateway.token(ADA, "Chat loop on laptop")
    ws = gateway.workspace_dir(ADA)
    app = config(tmp_path / "app.json", {"memory": {"enabled": True, "loadTimeout": 20}})
    with running_fake_chat() as fake:
        fake.extractions = ['{"facts": ["The user deploys the Fjord app to Hetzner every Friday."]}']
        proc = host(gateway, token, fake.base_url, "--config", app)
        try:
            assert header(proc)[0] == "memory: on, provider almanac: ready: memory_status answered"
            assert (
                say(proc, "We ship Fjord to Hetzner on Fridays.")
                == "(reply to: We ship Fjord to Hetzner on Fridays.)"
            )
            # The note's file is in place once durable, a moment before the save is acknowledged
            # and searchable: wait for what the next turn relies on, the fact in a context.
            wait_for(
                lambda: "Hetzner every Friday" in context(gateway, token, "Fjord"), what="the saved fact"
            )
            say(proc, "Where is the Fjord app deployed?")
        finally:
            finish(proc)
    first, second = (c["body"]["messages"][0]["content"] for c in fake.chats)
    assert first == SYSTEM  # nothing relevant yet: the prompt is exactly the memory-less one
    assert second.startswith(SYSTEM + "\n\n<memory>\n")
    assert "- The user deploys the Fjord app to Hetzner every Friday." in second
    (path,) = files_containing(ws / "notes", "Hetzner every Friday")
    assert "Chat loop on laptop" in path.read_text(encoding="utf-8")  # the connection's name is the source


def test_with_memory_off_the_prompt_is_byte_identical_and_almanac_is_not_called(gateway: Gateway) -> None:
    token = gateway.token(ADA, "Chat loop")
    before = gateway.metric("almanac_requests_total")
    with running_fake_chat() as fake:
        proc = host(gateway, token, fake.base_url)
        try:
            start = header(proc)
            assert start[0] == "memory: off (nothing is called)"
            assert all(line.endswith(" Default") for line in start[2:]) and len(start) == 2 + len(NAMES)
            say(proc, "We ship Fjord to Hetzner on Fridays.")
            say(proc, "Where is the Fjord app deployed?")
        finally:
            finish(proc)
        assert fake.extraction_requests == []
    for chat in fake.chats:
        assert chat["body"]["messages"] == [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": chat["body"]["messages"][1]["content"]},
        ]
    assert gateway.metric("almanac_requests_total") == before


@pytest.mark.anyio
async def test_a_refused_save_is_logged_and_the_turn_goes_on(
    gateway: Gateway, caplog: pytest.LogCaptureFixture, anyio_backend: str
) -> None:
    token = gateway.token(ADA, "Read only", "--read-only")
    endpoint = Endpoint.service(gateway.mcp_url, token)
    settings = HostSettings(enabled=True, load_timeout=20, save_timeout=60)
    caplog.set_level(logging.INFO, "almanac.host")
    with running_fake_chat() as fake:
        fake.extractions = ['{"facts": ["The user prefers tabs."]}']
        async with MemoryProvider(endpoint, settings, extract=openai_chat(fake.base_url, "m")) as memory:
            assert await memory.before_turn("What do I prefer?") == ""
            memory.after_turn("I prefer tabs", "Noted.")
            await memory.drain()
    assert "memory not saved:" in caplog.text and "read-only" in caplog.text


@pytest.mark.req("settings:layers")
def test_it_prints_each_settings_origin_and_the_providers_state_and_notes(
    gateway: Gateway, tmp_path: Path
) -> None:
    token = gateway.token(ADA, "Chat loop")
    (tmp_path / "app.toml").write_text("[memory]\nenabled = true\ntopK = 8\n", encoding="utf-8")
    app = str(tmp_path / "app.toml")
    ws = config(tmp_path / "config.json", {"defaults": {"memory": {"topK": 3, "newerKey": 1}}})
    with running_fake_chat() as fake:
        proc = host(gateway, token, fake.base_url, "--config", app, "--workspace-config", ws)
        try:
            start = header(proc)
        finally:
            finish(proc)
    assert start[0] == "memory: on, provider almanac: ready: memory_status answered"
    assert "  note: scoping: user / session / agent / turn" in start
    rows = {
        line.split()[0]: line.split(None, 2)[1:]
        for line in start
        if line.startswith("  ") and "note:" not in line
    }
    assert rows["enabled"] == ["true", "Instance default"]
    assert rows["topK"] == ["3", "Workspace override"]
    assert rows["autoSave"] == ["true", "Default"]
    assert rows["includeArchived"] == ["false", "Default"]


@pytest.mark.req("settings:strict")
def test_a_bad_workspace_layer_is_named_once_and_the_instance_provider_answers(tmp_path: Path) -> None:
    server = f"{sys.executable} -m tests.almanac.host.memory_server --dir {tmp_path / 'headroom'}"
    app = config(tmp_path / "app.json", {"memory": {"enabled": True, "provider": "mcp"}})
    ws = config(tmp_path / "config.json", {"defaults": {"memory": {"provider": "almanac", "topK": 0}}})
    with running_fake_chat() as fake:
        proc = run(fake.base_url, "--config", app, "--workspace-config", ws, "--mcp-command", server)
        try:
            start = header(proc)
            assert say(proc, "Hello") == "(reply to: Hello)"  # not set up: the turn goes on
        finally:
            errors = finish(proc)
    assert start[0].startswith("memory: on, provider headroom-mcp: not set up: the server starts")
    assert (
        "  note: Scoping collapses to a single user layer: a session, agent or turn save is saved unscoped."
        in start
    )
    (warning,) = [line for line in errors.splitlines() if "memory settings ignored" in line]
    assert ws in warning and "defaults.memory.topK" in warning
