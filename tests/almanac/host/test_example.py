"""The example host (examples/chat_loop.py) end to end: a real gateway, real engines, a real
subprocess, and a local fake OpenAI-compatible model server (host:turn-loop)."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from almanac.host import Endpoint, HostSettings, MemoryProvider, openai_chat
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


def host(gateway: Gateway, token: str, base_url: str, *memory: str) -> subprocess.Popen[str]:
    argv = [sys.executable, str(EXAMPLE), *memory, "--almanac-url", gateway.mcp_url, "--load-timeout", "20"]
    return subprocess.Popen(
        [*argv, "--model-url", base_url, "--model", "small"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env({"ALMANAC_TOKEN": token}),
    )


def say(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def finish(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        proc.stdout.close()


def test_a_fact_saved_after_one_turn_is_in_the_next_turns_prompt(gateway: Gateway) -> None:
    token = gateway.token(ADA, "Chat loop on laptop")
    ws = gateway.workspace_dir(ADA)
    with running_fake_chat() as fake:
        fake.extractions = ['{"facts": ["The user deploys the Fjord app to Hetzner every Friday."]}']
        proc = host(gateway, token, fake.base_url, "--memory")
        try:
            assert (
                say(proc, "We ship Fjord to Hetzner on Fridays.")
                == "(reply to: We ship Fjord to Hetzner on Fridays.)"
            )
            wait_for(
                lambda: bool(files_containing(ws / "notes", "Hetzner every Friday")), what="the saved fact"
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
