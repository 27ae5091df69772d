"""logging/setLevel, log notifications, and progress on long calls (engine:surface)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from engine.surface.notify import LogLevels
from engine.tools import build_server
from tests.engine.index.helpers import engine


def test_levels_filter_by_severity_per_connection() -> None:
    levels = LogLevels()
    assert levels.wants("a", "warning") and not levels.wants("a", "info")  # the default: warning
    levels.set("a", "debug")
    assert levels.wants("a", "debug") and not levels.wants("b", "info")
    levels.set("b", "error")
    assert levels.wants("b", "critical") and not levels.wants("b", "warning")


@pytest.mark.req("engine:surface")
def test_set_level_then_writes_are_logged_at_the_level_asked(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        server = build_server(e.memory, recall=e.recall)
        logs: list[Any] = []

        async def on_log(params: Any) -> None:
            logs.append(params)

        async def go() -> Any:
            async with Client(server, mode="legacy", logging_callback=on_log) as client:
                capabilities = client.server_capabilities
                await client.call_tool("remember", {"statement": "quiet by default"})
                quiet = list(logs)
                with warnings.catch_warnings():  # logging is deprecated by 2026-07-28, still 2025's way
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.set_logging_level("debug")
                fact = {
                    "statement": "Fjord uses Postgres",
                    "subject": "Fjord",
                    "predicate": "db",
                    "object": "PG",
                }
                receipt = (await client.call_tool("remember", fact)).structured_content
                await client.call_tool("get_context", {"query": "Fjord"})
                await client.call_tool("restore_memory", {"id": "nte_01M8N16DE4023GQ7VE9X9A8VJT"})
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.set_logging_level("error")
                await client.call_tool("remember", {"statement": "not logged at error level"})
                await client.call_tool("retire_memory", {"id": "nte_01M8N16DE4023GQ7VE9X9A8VJT"})  # refused
                return capabilities, quiet, receipt

        capabilities, quiet, receipt = anyio.run(go)
    assert capabilities.logging is not None
    assert quiet == []
    # "matched by words only" (notice) appears only while embeddings have not caught up: timing
    said = [(m.level, m.logger, m.data) for m in logs if "matched by words only" not in str(m.data)]
    assert said[0] == ("info", "almanac", f"remember: store fact {receipt['id']}")
    assert said[1][0] == "debug" and said[1][2].startswith("get_context: ")
    assert said[2][0] == "info" and said[2][2].startswith("restore_memory: refused: ")
    assert said[2][2].endswith("[not_found]")
    assert len(said) == 3  # at level error, neither the write (info) nor the refusal (info) is sent


@pytest.mark.req("engine:surface")
def test_a_long_call_reports_progress_until_it_is_done(tmp_path: Path) -> None:
    """memory_status waits for the workspace lock, held here until two heartbeats have arrived."""
    with engine(tmp_path) as e:
        server = build_server(e.memory, recall=e.recall, progress_interval=0.05)
        beats: list[tuple[float, float | None, str | None]] = []
        two_beats = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            beats.append((progress, total, message))
            if len(beats) >= 3:
                two_beats.set()

        async def go() -> Any:
            async with Client(server, mode="legacy") as client:
                e.ws.lock.acquire()
                held = True
                try:
                    async with anyio.create_task_group() as group:
                        results: list[Any] = []

                        async def status() -> None:
                            results.append(
                                await client.call_tool("memory_status", {}, progress_callback=on_progress)
                            )

                        group.start_soon(status)
                        with anyio.fail_after(30):
                            await two_beats.wait()
                        assert not results  # still waiting for the lock
                        e.ws.lock.release()
                        held = False
                finally:
                    if held:
                        e.ws.lock.release()
                return results[0]

        result = anyio.run(go)
    assert not result.is_error
    assert beats[0] == (0.0, None, "working")
    assert beats[1][2] is not None and beats[1][2].startswith("still working")
    progress = [b[0] for b in beats]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert beats[-1][0] == beats[-1][1] and beats[-1][2] == "done"
