"""The retrieval log on the admin surface (engine/admin/activity.py): reading backwards, paging,
and the real socket route after a real ``get_context`` through the engine's MCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest

from engine.admin.activity import entries, lines_backwards, page
from engine.ageing.retrieval_log import LOG, ROTATED
from tests.engine.support import socket_client, socket_engine


@pytest.mark.parametrize("block", [1, 3, 7, 64 * 1024])
def test_lines_come_back_last_first_whatever_the_block(tmp_path: Path, block: int) -> None:
    path = tmp_path / "log"
    lines = [f"line {i} " + "x" * i for i in range(12)]
    path.write_text("\n".join(lines) + "\n\n")
    assert [b.decode() for b in lines_backwards(path, block)] == list(reversed(lines))
    assert list(lines_backwards(tmp_path / "missing")) == []


def test_entries_newest_first_across_the_rotated_file_skipping_torn_lines(tmp_path: Path) -> None:
    (tmp_path / ROTATED).write_text('{"n": 1}\n{"n": 2}\n')
    (tmp_path / LOG).write_text('{"n": 3}\nnot json\n[4]\n{"n": 5}\n{"n": 6, "torn')
    assert [e["n"] for e in entries(tmp_path)] == [5, 3, 2, 1]


def test_pages_and_the_source_filter() -> None:
    found = [{"n": i, "source": "A" if i % 2 else "B"} for i in range(10, 0, -1)]
    first, more = page(iter(found), offset=0, limit=3, source=None)
    assert [e["n"] for e in first] == [10, 9, 8] and more
    last, more = page(iter(found), offset=9, limit=3, source=None)
    assert [e["n"] for e in last] == [1] and not more
    only_a, more = page(iter(found), offset=1, limit=2, source="A")
    assert [e["n"] for e in only_a] == [7, 5] and more
    scoped: list[dict[str, Any]] = [
        {"n": 1, "scope": "project:a"},
        {"n": 2, "scope": None},
        {"n": 3, "scope": "project:a"},
    ]
    in_a, more = page(iter(scoped), offset=0, limit=5, source=None, scope="project:a")
    assert [e["n"] for e in in_a] == [1, 3] and not more


@pytest.mark.req("life:retrieval-log")
def test_the_socket_shows_a_get_context_with_its_connection_and_no_content(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    secret_words = "the vault code is tangerine"
    with socket_engine(ws, sock, "--embedding-provider", "off"):
        who = {"x-almanac-connection": quote("Claude on laptop", safe=""), "x-almanac-connection-id": "con_1"}

        async def ask() -> str:
            async with socket_client(sock, headers=who) as client:
                saved = await client.call_tool("remember", {"statement": f"Remember: {secret_words}."})
                assert not saved.is_error
                found = await client.call_tool("get_context", {"query": "vault code"})
                assert not found.is_error
                assert saved.structured_content is not None
                return str(saved.structured_content["id"])

        memory_id = anyio.run(ask)
        with httpx.Client(
            transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost", timeout=30
        ) as http:
            reply = http.get("/admin/activity").json()
            assert len(reply["entries"]) == 1 and reply["more"] is False
            entry = reply["entries"][0]
            # the connection's stable id, never its name (a name can change, or be reused)
            assert entry["connection_id"] == "con_1" and entry["source"] is None
            assert entry["destination"] == "get_context" and "Claude on laptop" not in json.dumps(reply)
            assert len(http.get("/admin/activity", params={"connection": "con_1"}).json()["entries"]) == 1
            assert http.get("/admin/activity", params={"connection": "con_2"}).json()["entries"] == []
            assert entry["kept"] == [memory_id] and "query" not in entry and len(entry["query_sha256"]) == 64
            assert "tangerine" not in json.dumps(reply) and "vault" not in json.dumps(reply)
            assert http.get("/admin/activity", params={"source": "Cursor"}).json()["entries"] == []
            bad = http.get("/admin/activity", params={"limit": "0"})
            assert bad.status_code == 400 and "limit must be a whole number from 1 to 200" in bad.text
