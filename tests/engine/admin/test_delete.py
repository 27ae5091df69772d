"""``POST /admin/memories/{id}/delete`` on a real engine process (``life:delete``): the index forgets the
memory at once — no row, no word left in the index files — and a ``--reindex`` brings nothing back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import apsw
import httpx
import pytest

from tests.engine.support import engine_command, socket_client, socket_engine

pytestmark = pytest.mark.req("life:delete")

WORD = "Quokkaberry"  # in nothing but the memory that gets deleted
OFF = ("--embedding-provider", "off")


def index_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((root / ".index").glob("index.sqlite*")))


def index_rows(root: Path, memory_id: str) -> int:
    db = apsw.Connection(str(root / ".index" / "index.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        found = 0
        for table in ("chunks", "facts"):
            sql = f"SELECT count(*) FROM {table} WHERE memory = ?"
            (count,) = db.execute(sql, (memory_id,)).fetchall()[0]
            assert isinstance(count, int)
            found += count
        return found
    finally:
        db.close()


async def tool(sock: Path, name: str, args: dict[str, Any]) -> dict[str, Any]:
    async with socket_client(sock) as client:
        result = await client.call_tool(name, args)
        assert not result.is_error, result
        structured: dict[str, Any] = result.structured_content or {}
        return structured


def context_ids(sock: Path, query: str) -> set[str]:
    reply = anyio.run(tool, sock, "get_context", {"query": query})
    return {m["id"] for m in [*reply.get("facts", []), *reply.get("notes", [])] if isinstance(m, dict)}


async def tool_names(sock: Path) -> list[str]:
    async with socket_client(sock) as client:
        return [t.name for t in (await client.list_tools()).tools]


def test_delete_over_the_socket_and_the_index_forgets(tmp_path: Path) -> None:
    root, sock = tmp_path / "ws", tmp_path / "e.sock"
    http = httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost")
    with socket_engine(root, sock, *OFF), http:
        note = anyio.run(tool, sock, "remember", {"statement": f"The {WORD} grows on the north slope."})
        kept = anyio.run(tool, sock, "remember", {"statement": "The south slope has only grass."})
        assert note["id"] in context_ids(sock, WORD)
        assert not [name for name in anyio.run(tool_names, sock) if "delete" in name]  # agents cannot
        assert WORD.encode() in index_bytes(root) and index_rows(root, note["id"]) > 0

        live = http.post(f"/admin/memories/{note['id']}/delete", json={"source": "Dashboard"})
        assert live.status_code == 409 and live.json()["error"]["code"] == "not_retired"
        assert "retire it first" in live.json()["error"]["message"]
        anyio.run(tool, sock, "retire_memory", {"id": note["id"]})
        bad = http.post(f"/admin/memories/{note['id']}/delete", content=b"{}")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"

        done = http.post(f"/admin/memories/{note['id']}/delete", json={"source": "Dashboard"})
        assert done.status_code == 200, done.text
        assert done.json() | {"event_id": None} == {
            "action": "delete",
            "event_id": None,
            "id": note["id"],
            "kind": "note",
            "source": "Dashboard",
        }
        again = http.post(f"/admin/memories/{note['id']}/delete", json={"source": "Dashboard"})
        assert again.status_code == 404 and "already deleted permanently" in again.json()["error"]["message"]
        assert index_rows(root, note["id"]) == 0 and WORD.encode() not in index_bytes(root)
        assert note["id"] not in context_ids(sock, WORD)
        tombstone = http.get(f"/admin/memories/{note['id']}").json()["item"]
        assert tombstone["state"] == "deleted" and tombstone["source"] == "Dashboard"
        assert WORD not in json.dumps(tombstone)
        assert http.get("/admin/memories", params={"state": "deleted"}).json()["total"] == 1
        assert http.get("/admin/memories/nte_nope").status_code == 404

    rebuilt = subprocess.run(engine_command("--reindex", "--dir", str(root), *OFF), capture_output=True)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert WORD.encode() not in index_bytes(root) and index_rows(root, note["id"]) == 0
    assert WORD not in "".join(p.read_text(encoding="utf-8") for p in root.rglob("*.md"))
    with socket_engine(root, sock, *OFF):
        assert note["id"] not in context_ids(sock, WORD)
        assert kept["id"] in context_ids(sock, "south slope grass")
