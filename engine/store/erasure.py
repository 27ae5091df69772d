"""Erasing a deleted memory's content from the store (``life:delete``; docs/store-format.md,
"Deleting for good"): its note file, its day-log entry, and every ledger block about it written
before its ``delete`` event. Every other byte of a rewritten file is kept as it was.

The files only: :meth:`engine.store.workspace.Workspace.append_event` forgets the memory in memory
and calls these, with the workspace lock held, after the ``delete`` event is durable (or, on load,
to finish a deletion a crash interrupted). A failure raises ``StoreUnavailable``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from engine.store import daylog, fsio, ledger


def _exact(path: Path) -> str:
    """A file's text such that encoding it back (``surrogateescape``) gives its bytes unchanged."""
    return path.read_bytes().decode("utf-8", errors="surrogateescape")


def _write(path: Path, text: str) -> None:
    fsio.write_atomic(path, text.encode(errors="surrogateescape"))


def erase_note(path: Path) -> None:
    """Remove a note's file (gone already is fine)."""
    with fsio.durable("delete the note"):
        path.unlink(missing_ok=True)
        fsio.fsync_dir(path.parent)


def erase_log_entry(memory: str, day_files: Iterable[Path]) -> None:
    """Take the log entry ``memory`` out of each of ``day_files`` that exists."""
    for day_file in day_files:
        if day_file.exists():
            with fsio.durable("rewrite the day log"):
                _write(day_file, daylog.remove_entry(_exact(day_file), memory))


def erase_ledger_blocks(facts: Path, memory: str, before: str) -> None:
    """Take out of every ledger segment below ``facts`` the blocks about ``memory`` with an event id
    before ``before`` (its ``delete`` event's)."""
    for segment in fsio.md_files(facts):
        with fsio.durable("rewrite the ledger"):
            kept, erased = ledger.erase_blocks(_exact(segment), memory, before)
            if erased:
                _write(segment, kept)
