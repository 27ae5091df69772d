"""Another MCP memory server as the provider, against a real second server written for the test
(``tests/almanac/host/memory_server.py``, stdio, the ``mcp`` SDK) whose calls fail until it is set
up (host:turn-loop)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from almanac.host import (
    HEADROOM,
    Endpoint,
    HostSettings,
    McpMemoryProvider,
    McpTools,
    MemoryProvider,
    Scope,
    State,
)
from almanac.host.providers.base import OP_LIMIT_S
from tests.engine.support import engine_command
from tests.gateway.e2e import wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.req("host:turn-loop")]

ON = HostSettings(enabled=True, provider="mcp", top_k=2, load_timeout=20, save_timeout=20)


def server(root: Path) -> Endpoint:
    return Endpoint(command=(sys.executable, "-m", "tests.almanac.host.memory_server", "--dir", str(root)))


def set_up(root: Path) -> None:
    (root / "model.bin").write_bytes(b"weights")


def calls(root: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]


async def test_installed_but_not_set_up_then_ready_without_a_restart(tmp_path: Path) -> None:
    async with McpMemoryProvider(server(tmp_path), HEADROOM) as provider:
        before = await provider.state()
        set_up(tmp_path)  # the setup step, on the same running server: nothing reinstalled
        after = await provider.state()
    assert before.state is State.NOT_SET_UP
    assert "embedding model not found" in before.detail and "do not reinstall" in before.detail
    assert after.state is State.READY
    # decided by a real call of the search tool, not by the handshake or the tool list
    assert [c["tool"] for c in calls(tmp_path)] == ["memory_search", "memory_search"]


async def test_a_missing_program_is_not_available(tmp_path: Path) -> None:
    missing = Endpoint(command=(str(tmp_path / "no-such-headroom" / "python"), "-m", "headroom"))
    async with McpMemoryProvider(missing) as provider:
        found = await provider.state()
    assert found.state is State.NOT_AVAILABLE and "cannot connect" in found.detail


async def test_a_server_without_the_memory_tools_is_not_available(tmp_path: Path) -> None:
    almanac = Endpoint(command=(*engine_command(), "--stdio", "--dir", str(tmp_path / "ws")))
    async with McpMemoryProvider(almanac, HEADROOM) as provider:
        found = await provider.state()
    assert found.state is State.NOT_AVAILABLE
    assert "no memory_search or memory_save tool" in found.detail and "get_context" in found.detail


async def test_a_call_that_hangs_past_the_bound_is_not_available(tmp_path: Path) -> None:
    set_up(tmp_path)
    (tmp_path / "hang").touch()
    try:
        async with McpMemoryProvider(server(tmp_path)) as provider:
            began = time.monotonic()
            found = await provider.state(timeout=1.0)
            took = time.monotonic() - began
    finally:
        (tmp_path / "hang").unlink()
    assert found.state is State.NOT_AVAILABLE and "within 1 s" in found.detail
    assert took < 10


async def test_no_single_operation_may_take_over_20_seconds(tmp_path: Path) -> None:
    set_up(tmp_path)
    (tmp_path / "hang").touch()
    try:
        async with McpMemoryProvider(server(tmp_path)) as provider:
            began = time.monotonic()
            found = await provider.state(timeout=600)  # asked for more: still cut at 20 s
            took = time.monotonic() - began
    finally:
        (tmp_path / "hang").unlink()
    assert OP_LIMIT_S == 20
    assert found.state is State.NOT_AVAILABLE and "within 20 s" in found.detail
    assert OP_LIMIT_S <= took < OP_LIMIT_S + 10


async def test_the_turn_loop_runs_through_the_other_server(tmp_path: Path) -> None:
    set_up(tmp_path)
    facts = ["The user deploys Fjord to Hetzner.", "Fjord is deployed on Fridays.", "Fjord uses SQLite."]
    async with MemoryProvider(McpMemoryProvider(server(tmp_path)), ON) as memory:
        for fact in facts:
            assert await memory.remember(fact, scope=Scope.session("s1"))
        block = await memory.before_turn("Where is Fjord deployed, and on which days?")
    assert block.startswith("<memory>\n") and block.endswith("</memory>")
    assert "- The user deploys Fjord to Hetzner.\n" in block and "- Fjord is deployed on Fridays.\n" in block
    assert "SQLite" not in block  # topK 2, sent as the tools' limit and applied to what came back
    (search,) = [c for c in calls(tmp_path) if c["tool"] == "memory_search"]
    assert search["arguments"] == {"query": "Where is Fjord deployed, and on which days?", "top_k": 2}
    saves = [c["arguments"] for c in calls(tmp_path) if c["tool"] == "memory_save"]
    assert saves == [{"content": fact} for fact in facts]  # no scope: this surface has only the user layer


async def test_tool_and_argument_names_are_configurable(tmp_path: Path) -> None:
    set_up(tmp_path)
    plain = McpTools(limit_arg=None, name="plain-mcp")
    async with MemoryProvider(McpMemoryProvider(server(tmp_path), plain), ON) as memory:
        await memory.remember("The user prefers tabs.")
        assert "tabs" in await memory.before_turn("tabs or spaces?")
    (search,) = [c for c in calls(tmp_path) if c["tool"] == "memory_search"]
    assert search["arguments"] == {"query": "tabs or spaces?", "top_k": 5}  # the server's own default


async def test_the_provider_reports_its_own_limits(tmp_path: Path) -> None:
    set_up(tmp_path)
    async with McpMemoryProvider(server(tmp_path)) as provider:
        await provider.state()
        notes = provider.notes()
    assert notes.provider == "headroom-mcp" and notes.scoping == ("user",) and notes.reads == "text"
    assert not notes.decay and not notes.archive and not notes.retrieval_log
    lines = "\n".join(notes.lines())
    assert "collapses to a single user layer" in lines and "relevance number" in lines
    assert "Search saved memories by meaning." in lines  # the server's own words, read at the check


async def test_off_never_starts_the_server(tmp_path: Path) -> None:
    async with MemoryProvider(McpMemoryProvider(server(tmp_path)), HostSettings(provider="mcp")) as memory:
        assert await memory.before_turn("anything?") == ""
        assert await memory.remember("a fact") is False
        assert await memory.state() is None
    assert not (tmp_path / "calls.jsonl").exists()


async def test_a_save_attempt_over_20_seconds_is_tried_again_on_a_new_connection(tmp_path: Path) -> None:
    set_up(tmp_path)
    settings = HostSettings(enabled=True, provider="mcp", save_timeout=90)

    def saves() -> list[float]:
        found = calls(tmp_path) if (tmp_path / "calls.jsonl").exists() else []
        return [float(c["ts"]) for c in found if c["tool"] == "memory_save"]  # type: ignore[arg-type]

    provider = McpMemoryProvider(server(tmp_path))
    async with MemoryProvider(provider, settings) as memory, anyio.create_task_group() as tasks:
        state = await memory.state()  # the connection is open: the save's first attempt goes at once
        assert state is not None and state.state is State.READY
        (tmp_path / "hang").touch()
        tasks.start_soon(memory.remember, "The user prefers tabs.")
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: len(saves()) == 2, timeout=60, what="the second attempt")
        )
        (tmp_path / "hang").unlink()  # the second attempt, on a new server process, now lands
    first, second = saves()
    assert OP_LIMIT_S - 0.5 <= second - first < 60  # the first attempt was given 20 s, no more
    assert "The user prefers tabs." in (tmp_path / "memories.jsonl").read_text()
