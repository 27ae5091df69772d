"""What loading does with damage: binary and non-UTF-8 files, and a log entry left in two day files
by a crash in the middle of a retire or restore."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.memory import Memory
from engine.scope import Caller
from engine.store import daylog
from engine.store.model import State
from engine.store.workspace import Workspace

ME = Caller(client_name="test")


@pytest.mark.req("store:bad-file")
def test_binary_and_non_utf8_notes_are_named_and_not_loaded(
    root: Path, memory: Memory, workspace: Workspace
) -> None:
    kept = memory.remember(ME, "kept")
    day = root / "notes" / "2026" / "03" / "14"
    (day / "random.md").write_bytes(os.urandom(65536) + b"\0")
    (day / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (root / "logs" / "2026" / "03").mkdir(parents=True)
    (root / "logs" / "2026" / "03" / "15.md").write_bytes(b"\0\1\2 binary")
    workspace.load()
    assert set(workspace.notes) == {kept.id}
    named = {p.path: p.message for p in workspace.problems}
    assert set(named) == {
        "notes/2026/03/14/random.md",
        "notes/2026/03/14/latin1.md",
        "logs/2026/03/15.md",
    }
    assert "binary" in named["notes/2026/03/14/random.md"]
    assert "not UTF-8" in named["notes/2026/03/14/latin1.md"]
    assert (day / "latin1.md").read_bytes() == "caf\xe9 au lait".encode("latin-1")  # left as it was


@pytest.mark.req("store:bad-file")
def test_a_ledger_with_one_bad_byte_keeps_its_facts_and_is_named(root: Path, memory: Memory) -> None:
    memory.save_memory(ME, "Fjord", "database", "Postgres")
    segment = next((root / "facts").glob("*.md"))
    segment.write_bytes(segment.read_bytes() + b"\n\xff stray byte\n")
    ws = Workspace(root)
    ws.load()
    assert [r.current.object for r in ws.facts.records.values() if r.current] == ["Postgres"]
    assert any("not UTF-8" in p.message and p.path.startswith("facts/") for p in ws.problems)


def _half_moved(root: Path, memory: Memory, workspace: Workspace, retired_first: bool) -> tuple[str, Path]:
    """A log entry as a crash between the two file writes of a move leaves it: in both day files."""
    receipt = memory.remember_note(ME, "Backups verified.\nRestore drill took 4 minutes.")
    if retired_first:
        memory.retire(ME, receipt.id)
    record = workspace.logs[receipt.id]
    target = State.LIVE if retired_first else State.RETIRED
    path = workspace.log_file(record.day, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = b"" if path.exists() else daylog.day_title(record.day).encode()
    with open(path, "ab") as handle:  # exactly what the move appends before it rewrites the source
        handle.write(prefix + daylog.format_entry(record.entry).encode())
    return receipt.id, path


def _copies(root: Path, entry_id: str) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*.md")) if entry_id in p.read_text()]


@pytest.mark.req("store:durable")
@pytest.mark.parametrize("retired_first", [False, True], ids=["crash-in-retire", "crash-in-restore"])
def test_a_log_entry_in_two_day_files_keeps_the_copy_the_ledger_names(
    root: Path, memory: Memory, workspace: Workspace, clock: object, retired_first: bool
) -> None:
    entry_id, extra = _half_moved(root, memory, workspace, retired_first)
    assert len([c for c in _copies(root, entry_id) if not c.startswith("facts/")]) == 2
    workspace.load()  # as the next engine start does
    expected = State.RETIRED if retired_first else State.LIVE
    assert workspace.logs[entry_id].state is expected
    files = [c for c in _copies(root, entry_id) if not c.startswith("facts/")]
    assert files == [str(workspace.log_file(workspace.logs[entry_id].day, expected).relative_to(root))]
    assert entry_id not in extra.read_text()
    # and the interrupted move can be made again, leaving one copy
    if retired_first:
        memory.restore(ME, entry_id)
    else:
        memory.retire(ME, entry_id)
    workspace.load()
    files = [c for c in _copies(root, entry_id) if not c.startswith("facts/")]
    assert len(files) == 1 and workspace.logs[entry_id].state is not expected


@pytest.mark.req("store:durable")
def test_two_different_copies_are_both_left_and_named(
    root: Path, memory: Memory, workspace: Workspace
) -> None:
    receipt = memory.remember_note(ME, "the original words")
    record = workspace.logs[receipt.id]
    path = workspace.log_file(record.day, State.RETIRED)
    path.parent.mkdir(parents=True)
    edited = record.entry.__class__(record.entry.id, record.entry.time, "words edited by hand", None, None)
    path.write_text(daylog.day_title(record.day) + daylog.format_entry(edited))
    before = path.read_bytes()
    workspace.load()
    assert workspace.logs[receipt.id].state is State.LIVE and path.read_bytes() == before
    assert any(p.path.startswith("retired/logs/") for p in workspace.problems)
