"""Erasing a deleted memory's content from the store (``life:delete``; docs/store-format.md,
"Deleting for good"): its note file, its day-log entry, and every ledger block about it written
before its ``delete`` event. Every other byte of a rewritten file is kept as it was.

Called with the workspace lock held, after the ``delete`` event is durable (or, on load, to finish
a deletion a crash interrupted).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from engine.store import daylog, fsio, ledger
from engine.store.fsio import durable, md_files
from engine.store.layout import FACTS
from engine.store.model import State

if TYPE_CHECKING:
    from engine.store.workspace import Workspace


def _exact(path: Path) -> str:
    """A file's text such that encoding it back (``surrogateescape``) gives its bytes unchanged."""
    return path.read_bytes().decode("utf-8", errors="surrogateescape")


def _write(path: Path, text: str) -> None:
    fsio.write_atomic(path, text.encode(errors="surrogateescape"))


def erase_content(ws: Workspace, memory: str, before: str) -> None:
    """Remove ``memory``'s content; ``before`` is its ``delete`` event's id (ledger blocks about it
    with an earlier id go)."""
    from engine.store.workspace import content_key

    note = ws.notes.pop(memory, None)
    if note is not None:
        key = content_key(note.note.scope, note.note.body)
        if ws.note_by_content.get(key) == memory:
            del ws.note_by_content[key]
        path = ws.note_path(note)
        with durable("delete the note"):
            path.unlink(missing_ok=True)
            fsio.fsync_dir(path.parent)
    entry = ws.logs.pop(memory, None)
    if entry is not None:
        for state in (State.LIVE, State.RETIRED):
            day_file = ws.log_file(entry.day, state)
            if day_file.exists():
                with durable("rewrite the day log"):
                    _write(day_file, daylog.remove_entry(_exact(day_file), memory))
    for segment in md_files(ws.root / FACTS):
        with durable("rewrite the ledger"):
            kept, erased = ledger.erase_blocks(_exact(segment), memory, before)
            if erased:
                _write(segment, kept)
