"""The cold-storage banner travels with archived content everywhere (``life:archive``): a note
moved into ``archive/`` by hand, without a banner, carries one in ``get_context``, in the host's
``<memory>`` block, in the owner's listing and in an export — and its file is left as it is."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from almanac.host import memory_block
from engine.admin.memories import rows
from engine.memory import Memory
from engine.store.cold import BANNER, bannered, has_banner, without_banner
from engine.store.model import Note, State
from engine.store.workspace import Workspace
from engine.tools import build_server
from engine.transfer.archive import export
from tests.engine.index.helpers import CALLER, engine

pytestmark = pytest.mark.req("life:archive")


def move_by_hand(ws: Workspace, memory_id: str) -> Path:
    """Move a note's file from notes/ into archive/ as a person would (no banner, no engine)."""
    record = ws.notes[memory_id]
    target = ws.root / "archive" / record.rel
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(ws.note_path(record), target)
    return target


def test_a_note_read_from_archive_without_a_banner_is_given_one_in_memory_only() -> None:
    note = Note("nte_x", "> a quote the owner wrote\n\nwords")
    read = bannered(note)
    assert has_banner(read.body) and read.body.endswith("\n\n> a quote the owner wrote\n\nwords")
    assert "Archived by hand; unverified since." in read.body
    assert without_banner(read.body) == note.body  # restoring takes exactly it off
    assert bannered(read) == read  # never twice


def test_every_surface_carries_the_banner_of_a_note_moved_by_hand(tmp_path: Path) -> None:
    with engine(tmp_path / "ws") as e:
        live = e.memory.remember(CALLER, "The walrus census counted 41 animals on the north beach.")
        cold = e.memory.remember(CALLER, "The walrus feeding schedule was every Tuesday at dawn.")
        path = move_by_hand(e.ws, cold.id)
        original = path.read_bytes()
        assert e.indexer.scan_once()
        e.settle()
        assert e.ws.notes[cold.id].state is State.ARCHIVED
        assert path.read_bytes() == original and BANNER.encode() not in original  # the file is the owner's

        # get_context, through the real MCP client
        server = build_server(e.memory, recall=e.recall)

        async def ask() -> dict[str, Any]:
            async with Client(server) as client:
                args = {"query": "walrus feeding schedule", "include_archived": True}
                result = await client.call_tool("get_context", args)
                assert not result.is_error
                data: dict[str, Any] = result.structured_content or {}
                return data

        reply = anyio.run(ask)
        item = next(n for n in reply["notes"] if n["id"] == cold.id)
        assert item["archived"] is True and item["banner"] == BANNER and item["text"].startswith(BANNER)
        assert not next(n for n in reply["notes"] if n["id"] == live.id).get("archived")

        # the host's <memory> block
        block = memory_block(reply)
        line = next(x for x in block.split("\n- ") if "feeding schedule" in x)
        assert line.startswith(BANNER)

        # the owner's listing (the dashboard's Memories page reads it)
        row = next(r for r in rows(e.ws) if r.id == cold.id)
        assert row.state == "archived" and row.text.startswith(BANNER)

        # an export: the archived note banner first, every other file byte for byte
        out = tmp_path / "export.zip"
        export(e.ws, out, io.StringIO())
        with zipfile.ZipFile(out) as archive:
            exported = archive.read(str(path.relative_to(e.ws.root))).decode()
            live_rel = e.ws.note_path(e.ws.notes[live.id]).relative_to(e.ws.root)
            assert archive.read(str(live_rel)) == (e.ws.root / live_rel).read_bytes()
        assert BANNER in exported and exported.index(BANNER) > exported.index("---\n", 4)

        # restored, it comes back exactly as it was written
        Memory(e.ws).restore(CALLER, cold.id)
        back = e.ws.note_path(e.ws.notes[cold.id])
        assert BANNER.encode() not in back.read_bytes()
        assert e.ws.notes[cold.id].note.body == "The walrus feeding schedule was every Tuesday at dawn."


def test_a_note_moved_into_archive_by_the_engine_carries_it_too(tmp_path: Path) -> None:
    with engine(tmp_path / "ws") as e:
        cold = e.memory.remember(CALLER, "The otter enclosure closes for repairs in March.")
        with e.ws.lock:
            e.ws.move_note(cold.id, State.ARCHIVED)
        e.settle()
        found = e.recall.get_context(CALLER, "otter enclosure repairs", include_archived=True)
        item = next(n for n in found["notes"] if n["id"] == cold.id)
        assert item["text"].startswith(BANNER) and item["archived"] is True
