"""The host's retrieval log: one line per search, with its provider and destination, and never
any content (life:retrieval-log)."""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from almanac.host import AlmanacProvider, Endpoint, HostSettings, McpMemoryProvider, MemoryProvider, Scope

pytestmark = [pytest.mark.anyio, pytest.mark.req("life:retrieval-log")]

SENTINEL = "zebracrossing4242"
ON = HostSettings(enabled=True, auto_save=False, load_timeout=20, save_timeout=20)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_each_search_is_logged_with_provider_and_destination_and_no_content(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "retrieval-log.jsonl"
    provider = AlmanacProvider.folder(str(tmp_path / "ws"), args=("--embedding-provider", "off"))
    async with MemoryProvider(provider, ON, retrieval_log=log) as memory:
        await memory.remember(f"The {SENTINEL} gate code is kept in the Fjord vault.")
        await memory.remember(f"Session s1 keeps the {SENTINEL} spare key.", scope=Scope.session("s1"))
        automatic = await memory.before_turn(f"Where is the {SENTINEL} gate code kept?")
        deliberate = await memory.load(f"{SENTINEL} key", scope=Scope.session("s1"), destination="side-panel")
    assert SENTINEL in automatic and SENTINEL in deliberate  # it was put in front of the model...
    text = log.read_text(encoding="utf-8")
    assert SENTINEL not in text and "vault" not in text and "spare" not in text  # ...and never logged
    first, second = lines(log)
    assert first["provider"] == "almanac" and first["destination"] == "main-context" and first["scope"] == {}
    assert second["destination"] == "side-panel" and second["scope"] == {"session": "s1"}
    assert first["outcome"] == second["outcome"] == "ok" and first["mode"] == "keyword"
    for line in (first, second):
        kept = line["kept"]
        assert isinstance(kept, list) and kept and all(str(k).startswith("nte_") for k in kept)
        assert line["loaded"] == len(kept) + line["trimmed"]
        assert len(str(line["query_sha256"])) == 64 and isinstance(line["latency_ms"], float)
    assert first["chars"] == len(automatic)


async def test_another_servers_results_are_logged_by_a_hash_of_their_text(tmp_path: Path) -> None:
    log = tmp_path / "retrieval-log.jsonl"
    (tmp_path / "model.bin").write_bytes(b"weights")
    server = Endpoint(
        command=(sys.executable, "-m", "tests.almanac.host.memory_server", "--dir", str(tmp_path))
    )
    async with MemoryProvider(McpMemoryProvider(server), ON, retrieval_log=log) as memory:
        await memory.remember(f"The {SENTINEL} gate code is kept in the Fjord vault.")
        assert SENTINEL in await memory.before_turn(f"{SENTINEL} gate code?")
    (line,) = lines(log)
    assert SENTINEL not in log.read_text(encoding="utf-8")
    assert line["provider"] == "headroom-mcp" and line["mode"] == "text"
    (kept,) = line["kept"]
    assert str(kept).startswith("sha256:")


async def test_a_failed_search_is_logged_as_such(
    tmp_path: Path, closed_port: int, silent_server: socket.socket
) -> None:
    log = tmp_path / "retrieval-log.jsonl"
    closed = AlmanacProvider.service(f"http://127.0.0.1:{closed_port}/mcp", "t")
    async with MemoryProvider(closed, ON, retrieval_log=log) as memory:
        assert await memory.before_turn(f"Where is the {SENTINEL}?") == ""
    silent = AlmanacProvider.service(f"http://127.0.0.1:{silent_server.getsockname()[1]}/mcp", "t")
    async with MemoryProvider(silent, replace(ON, load_timeout=0.5), retrieval_log=log) as memory:
        assert await memory.before_turn(f"Where is the {SENTINEL}?") == ""
    unavailable, timeout = lines(log)
    assert unavailable["outcome"] == "unavailable" and timeout["outcome"] == "timeout"
    assert unavailable["kept"] == [] and unavailable["loaded"] == 0
    assert SENTINEL not in log.read_text(encoding="utf-8")
