"""A connection lists only what it may call, and a pinned one is told its scope (engine:surface)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.surface.connection import Identity, identity_of, listed
from engine.surface.manual import WRITE_TOOLS
from tests.engine.support import socket_client, socket_engine

READ_TOOLS = {"retrieve_memory", "get_context", "memory_status"}


def test_listing_is_narrowed_by_identity() -> None:
    tools = [{"name": "remember", "description": "Save."}, {"name": "get_context", "description": "Read."}]
    assert listed(Identity(), tools) == tools
    assert listed(Identity(read_only=True), tools) == [tools[1]]
    pinned = listed(Identity(pinned_scope="project:fjord"), tools)
    assert [t["description"].split("\n")[0] for t in pinned] == ["Save.", "Read."]
    assert all("pinned to scope 'project:fjord'" in t["description"] for t in pinned)
    assert identity_of({"x-almanac-read-only": "1", "x-almanac-scope": "s"}) == Identity(None, True, "s")
    wide = {"x-almanac-scope": "s", "x-almanac-scope-unscoped": "1"}
    assert identity_of(wide) == Identity(None, False, "s", reads_unscoped=True)
    assert not identity_of({**wide, "x-almanac-scope-unscoped": "yes"}).reads_unscoped  # only "1" widens


@pytest.mark.req("engine:surface")
@pytest.mark.req("engine:identity")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_read_only_connection_lists_only_the_read_tools_and_a_pinned_one_is_told(
    tmp_path: Path, mode: str
) -> None:
    sock = tmp_path / "e.sock"
    reader = {"X-Almanac-Connection": "viewer", "X-Almanac-Read-Only": "1"}
    pinned = {"X-Almanac-Connection": "fjord-bot", "X-Almanac-Scope": "project:fjord"}
    wide = {**pinned, "X-Almanac-Scope-Unscoped": "1"}
    with socket_engine(tmp_path / "ws", sock):

        async def go() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with socket_client(sock, {"X-Almanac-Connection": "owner"}, mode=mode) as client:
                out["owner"] = (await client.list_tools()).tools
            async with socket_client(sock, reader, mode=mode) as client:
                out["reader"] = (await client.list_tools()).tools
                out["write"] = await client.call_tool("remember", {"statement": "nope"})
            async with socket_client(sock, pinned, mode=mode) as client:
                out["pinned"] = (await client.list_tools()).tools
            async with socket_client(sock, wide, mode=mode) as client:
                out["wide"] = (await client.list_tools()).tools
            return out

        out = anyio.run(go)
    assert {t.name for t in out["owner"]} == READ_TOOLS | WRITE_TOOLS
    assert not any("pinned" in (t.description or "") for t in out["owner"])
    assert {t.name for t in out["reader"]} == READ_TOOLS
    assert all(t.annotations is not None and t.annotations.read_only_hint for t in out["reader"])
    write = out["write"]
    assert write.is_error and "read-only" in write.content[0].text and "[read_only]" in write.content[0].text
    assert {t.name for t in out["pinned"]} == READ_TOOLS | WRITE_TOOLS
    told = "This connection is pinned to scope 'project:fjord': writes, retires and restores only in it; "
    for tool in out["pinned"]:
        assert tool.description is not None
        assert tool.description.endswith(told + "reads see only it; a scope argument may only name it."), (
            tool.name
        )
    for tool in out["wide"]:
        assert tool.description is not None
        assert tool.description.endswith(
            told + "reads see it plus unscoped memories; a scope argument may only name it."
        ), tool.name
