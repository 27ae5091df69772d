"""The turn loop against a real local engine over stdio (host:turn-loop)."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

import anyio
import pytest
import yaml

from almanac.host import Endpoint, HostSettings, MemoryProvider, openai_chat
from tests.almanac.host.fake_chat import FakeChat, running_fake_chat

pytestmark = [pytest.mark.anyio, pytest.mark.req("host:turn-loop")]

ON = HostSettings(enabled=True, load_timeout=20, save_timeout=60)


def engine(ws: Path) -> Endpoint:
    argv = ("-m", "engine", "--stdio", "--dir", str(ws), "--embedding-provider", "off")  # keyword recall
    return Endpoint(command=(sys.executable, *argv))


def saved_notes(ws: Path) -> list[dict[str, object]]:
    """The frontmatter and body of every note on disk."""
    found = []
    for path in sorted((ws / "notes").rglob("*.md")) if (ws / "notes").exists() else []:
        _, head, body = path.read_text(encoding="utf-8").split("---\n", 2)
        found.append({**yaml.safe_load(head), "body": body.strip()})
    return found


async def turn(ws: Path, fake: FakeChat, message: str, reply: str) -> str:
    async with MemoryProvider(engine(ws), ON, extract=openai_chat(fake.base_url, "m")) as memory:
        block = await memory.before_turn(message)
        memory.after_turn(message, reply)
        await memory.drain()
    return block


async def test_a_saved_fact_is_found_by_the_next_turn(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    with running_fake_chat() as fake:
        fake.extractions = ['{"facts": ["The user deploys the Fjord app to Hetzner every Friday."]}']
        async with MemoryProvider(engine(ws), ON, extract=openai_chat(fake.base_url, "m")) as memory:
            assert await memory.before_turn("Where is the Fjord app deployed?") == ""
            memory.after_turn("We ship Fjord to Hetzner on Fridays.", "Noted.")
            await memory.drain()
            block = await memory.before_turn("Where is the Fjord app deployed?")
    assert (
        block.startswith("<memory>") and "- The user deploys the Fjord app to Hetzner every Friday." in block
    )
    (note,) = saved_notes(ws)
    assert note["importance"] == 0.5 and "scope" not in note  # unscoped, as the seed says


@pytest.mark.parametrize(
    ("answer", "count"),
    [
        ('{"facts": []}', 0),
        ('{"facts": ["The user is called Ada."]}', 1),
        ('{"facts": ["The user is called Ada.", "Ada works on Fjord.", "Fjord is written in Rust."]}', 3),
        ("I could not find anything.", 0),  # malformed: refused whole, nothing saved, turn unharmed
        ('{"facts": ["a.", "b.", "c.", "d."]}', 0),
    ],
)
async def test_extraction_outcomes(
    tmp_path: Path, answer: str, count: int, caplog: pytest.LogCaptureFixture
) -> None:
    ws = tmp_path / "ws"
    caplog.set_level(logging.INFO, "almanac.host")
    with running_fake_chat() as fake:
        fake.extractions = [answer]
        await turn(ws, fake, "Hello, I am Ada and I work on Fjord, in Rust.", "Hi Ada!")
        assert len(fake.extraction_requests) == 1
    assert len(saved_notes(ws)) == count
    if count == 0 and "facts" not in answer[:12]:
        assert "memory not saved" in caplog.text


async def test_off_calls_nothing_and_adds_nothing(silent_server: socket.socket) -> None:
    port = silent_server.getsockname()[1]
    endpoint = Endpoint.service(f"http://127.0.0.1:{port}/mcp", "t")
    with running_fake_chat() as fake:
        async with MemoryProvider(
            endpoint, HostSettings(), extract=openai_chat(fake.base_url, "m")
        ) as memory:
            assert await memory.before_turn("What do I prefer?") == ""
            memory.after_turn("I prefer tabs", "Noted.")
            await memory.drain()
        assert fake.extraction_requests == []
    with pytest.raises(BlockingIOError):  # no connection was ever made to Almanac
        silent_server.accept()


async def test_unreachable_almanac_never_breaks_a_turn(
    closed_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = Endpoint.service(f"http://127.0.0.1:{closed_port}/mcp", "t")
    settings = HostSettings(enabled=True, load_timeout=20, save_timeout=2)
    with running_fake_chat() as fake:
        fake.extractions = ['{"facts": ["The user prefers tabs."]}']
        with anyio.fail_after(30):
            async with MemoryProvider(endpoint, settings, extract=openai_chat(fake.base_url, "m")) as memory:
                assert await memory.before_turn("What do I prefer?") == ""
                memory.after_turn("I prefer tabs", "Noted.")
                await memory.drain()
                status = memory.status
    assert "memory not loaded: cannot connect to Almanac" in caplog.text
    # the save was tried again until its bound, then counted as failed, with the last reason
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("memory not saved")]
    assert "cannot connect to Almanac" in line and "save_timeout 2.0 s" in line
    assert line.endswith("(failed saves so far: 1)")
    assert (status.saved, status.failed, status.lost, status.pending) == (0, 1, 1, 0)


async def test_a_silent_almanac_is_given_up_on_within_the_bound(
    silent_server: socket.socket, caplog: pytest.LogCaptureFixture
) -> None:
    port = silent_server.getsockname()[1]
    settings = HostSettings(enabled=True, load_timeout=0.5, save_timeout=1.0)
    with running_fake_chat() as fake:
        fake.extractions = ['{"facts": ["The user prefers tabs."]}']
        with anyio.fail_after(20):
            async with MemoryProvider(
                Endpoint.service(f"http://127.0.0.1:{port}/mcp", "t"),
                settings,
                extract=openai_chat(fake.base_url, "m"),
            ) as memory:
                assert await memory.before_turn("What do I prefer?") == ""
                memory.after_turn("I prefer tabs", "Noted.")
                await memory.drain()
    assert "did not answer within 0.5 s" in caplog.text
    assert "remember did not land in time" in caplog.text and "save_timeout 1.0 s" in caplog.text
