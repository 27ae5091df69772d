"""Almanac as a provider: its three states against a real ``almanac serve`` and a local folder, its
notes, and ``decayHalfLifeDays``/``includeArchived``/``topK`` honoured end to end (host:turn-loop)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from almanac.host import AlmanacProvider, HostSettings, MemoryProvider, State
from engine.memory import Memory
from engine.scope import Caller
from engine.store.workspace import Workspace
from tests.almanac.host.test_reconnect import Conversation
from tests.engine.conftest import Clock
from tests.engine.support import socket_engine
from tests.gateway.e2e import wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.req("host:turn-loop")]

ADA = "ada@example.com"
OFF = ("--embedding-provider", "off")  # keyword recall: what matches is plain to see


@pytest.fixture
def talk(tmp_path: Path) -> Iterator[Conversation]:
    # a workspace whose engine cannot start answers 503 quickly (no crash-loop verdict meanwhile)
    conversation = Conversation(
        tmp_path,
        retry_after="1",
        restart_backoff_initial="0.05",
        restart_backoff_max="0.5",
        crash_loop_threshold="50",
    )
    try:
        yield conversation
    finally:
        conversation.gateway.stop()


async def test_almanac_up_is_ready(talk: Conversation) -> None:
    async with AlmanacProvider.service(talk.gateway.mcp_url, talk.token) as provider:
        found = await provider.state()
        notes = provider.notes()
    assert found.state is State.READY
    assert notes.scoping == ("user", "session", "agent", "turn") and notes.reads == "records"
    assert notes.decay and notes.archive and notes.retrieval_log
    assert "Decay half-life: 60 days (default)." in notes.lines()  # the workspace's, read at the check


async def test_a_revoked_token_is_not_set_up(talk: Conversation) -> None:
    talk.gateway.cli("token", "revoke", "Host", "--owner", ADA)
    async with AlmanacProvider.service(talk.gateway.mcp_url, talk.token) as provider:
        found = await provider.state()
    assert found.state is State.NOT_SET_UP
    assert found.detail.startswith("HTTP 401: the token was refused")


async def test_a_workspace_that_cannot_start_is_not_set_up(talk: Conversation, tmp_path: Path) -> None:
    # another engine holds the workspace's lock: the gateway cannot start its own
    with socket_engine(talk.ws, tmp_path / "squatter.sock", *OFF):
        async with AlmanacProvider.service(talk.gateway.mcp_url, talk.token) as provider:
            found = await provider.state()
    assert found.state is State.NOT_SET_UP
    assert found.detail.startswith("HTTP 503: the workspace's engine cannot start now")


async def test_nothing_listening_is_not_available(closed_port: int) -> None:
    async with AlmanacProvider.service(f"http://127.0.0.1:{closed_port}/mcp", "t") as provider:
        found = await provider.state()
    assert found.state is State.NOT_AVAILABLE and "cannot connect to Almanac" in found.detail


async def test_a_local_folder_is_ready_with_no_server(tmp_path: Path) -> None:
    async with AlmanacProvider.folder(str(tmp_path / "ws"), args=OFF) as provider:
        found = await provider.state()
        notes = provider.notes()
    assert found.state is State.READY
    assert notes.search.startswith("keyword") and any("Local folder" in line for line in notes.lines())


async def test_a_local_folder_whose_engine_cannot_run_is_not_available(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-python")
    async with AlmanacProvider.folder(str(tmp_path / "ws"), python=missing) as provider:
        found = await provider.state()
    assert found.state is State.NOT_AVAILABLE


def old_note(ws: Path, text: str, days: float) -> None:
    """A note saved ``days`` ago and never read since."""
    store = Workspace(ws)
    store.open()
    try:
        Memory(store, Clock(datetime.now(UTC) - timedelta(days=days))).remember(Caller(client_name="t"), text)
    finally:
        store.close()


def archived(ws: Path) -> bool:
    return any((ws / "archive").rglob("*.md")) if (ws / "archive").exists() else False


async def block(ws: Path, settings: HostSettings, message: str, *, sweep: bool = False) -> str:
    async with MemoryProvider(AlmanacProvider.folder(str(ws), args=OFF), settings) as memory:
        state = await memory.state()  # a real call: the engine starts, and sweeps what aged meanwhile
        assert state is not None and state.state is State.READY
        if sweep:
            await anyio.to_thread.run_sync(lambda: wait_for(lambda: archived(ws), what="the archive sweep"))
        return await memory.before_turn(message)


@pytest.mark.req("life:archive")
async def test_the_half_life_and_include_archived_reach_a_local_engine(tmp_path: Path) -> None:
    # 100 days old: at the default half-life of 60 days it scores 0.31 (kept); at 30 days, 0.10 —
    # below 0.25, so the engine the library starts archives it
    kept, faded = tmp_path / "kept", tmp_path / "faded"
    for ws in (kept, faded):
        old_note(ws, "The Fjord staging server lives in Falkenstein.", days=100)
    message = "Where does the Fjord staging server live?"
    on = HostSettings(enabled=True, auto_save=False, load_timeout=20)
    hot = await block(kept, on, message)
    assert "- The Fjord staging server lives in Falkenstein." in hot and not archived(kept)

    short = HostSettings(enabled=True, auto_save=False, load_timeout=20, decay_half_life_days=30)
    assert await block(faded, short, message, sweep=True) == ""  # archived: not searched by default
    cold = await block(faded, replace(short, include_archived=True), message)
    assert "- > **⚠️ From cold storage" in cold and "Falkenstein" in cold


async def test_top_k_bounds_what_a_load_returns(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    settings = HostSettings(enabled=True, auto_save=False, load_timeout=20, top_k=2)
    async with MemoryProvider(AlmanacProvider.folder(str(ws), args=OFF), settings) as memory:
        for n in range(5):
            await memory.remember(f"Fjord release {n} shipped on a Friday.")
        capped = await memory.before_turn("Which Fjord release shipped on a Friday?")
    assert capped.count("\n- ") == 2
    wide = HostSettings(enabled=True, auto_save=False, load_timeout=20, top_k=50)
    async with MemoryProvider(AlmanacProvider.folder(str(ws), args=OFF), wide) as memory:
        assert (await memory.before_turn("Which Fjord release shipped on a Friday?")).count("\n- ") == 5


def test_the_local_folder_runs_the_engine_over_stdio() -> None:
    provider = AlmanacProvider.folder("/srv/notes", args=OFF)
    assert provider.endpoint.command == (
        sys.executable,
        "-m",
        "engine",
        "--stdio",
        "--dir",
        "/srv/notes",
        *OFF,
    )
    assert provider.endpoint.url is None
