from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from engine.errors import StoreUnavailable, WorkspaceLocked
from engine.memory import Memory
from engine.scope import Caller
from engine.store.model import State
from engine.store.workspace import Workspace
from tests.engine.conftest import Clock
from tests.engine.support import snapshot

ME = Caller(client_name="test")


@pytest.mark.req("store:layout")
def test_directories_are_created_on_first_write_not_before(root: Path, memory: Memory) -> None:
    assert sorted(p.name for p in root.iterdir()) == [".almanac.lock"]
    memory.remember(ME, "a note")
    assert sorted(p.name for p in root.iterdir()) == [".almanac.lock", "notes"]
    receipt = memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")
    memory.remember_note(ME, "deployed")
    assert sorted(p.name for p in root.iterdir()) == [".almanac.lock", "facts", "logs", "notes"]
    assert (root / "facts" / "2026-03.md").is_file()
    assert (root / "logs" / "2026" / "03" / "14.md").is_file()
    assert receipt.id.startswith("fct_")
    note = next((root / "notes").rglob("*.md"))
    assert note.relative_to(root).parts[:4] == ("notes", "2026", "03", "14")


@pytest.mark.req("store:directory-authority")
def test_moving_a_note_file_by_hand_changes_its_state(
    root: Path, memory: Memory, workspace: Workspace
) -> None:
    receipt = memory.remember(ME, "the staging box is called kelp")
    workspace.close()
    live = root / receipt.path  # type: ignore[operator]
    retired = root / "retired" / Path(*live.relative_to(root).parts)  # retired/notes/…
    retired.parent.mkdir(parents=True)
    shutil.move(live, retired)
    reopened = Workspace(root)
    reopened.open()
    try:
        assert reopened.notes[receipt.id].state is State.RETIRED
        restored = Memory(reopened).restore(ME, receipt.id)
        assert restored.action == "restore"
        assert live.is_file() and not retired.exists()
        archived = root / "archive" / live.relative_to(root / "notes")
        archived.parent.mkdir(parents=True)
        shutil.move(live, archived)
        reopened.load()
        assert reopened.notes[receipt.id].state is State.ARCHIVED
    finally:
        reopened.close()


@pytest.mark.req("store:bad-file")
def test_an_unparseable_file_is_skipped_with_a_warning(
    root: Path, memory: Memory, workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    good = memory.remember(ME, "kept")
    memory.remember_note(ME, "log kept")
    bad_note = root / "notes" / "2026" / "03" / "14" / "broken.md"
    bad_note.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    (root / "logs" / "2026" / "03" / "15.md").write_text("- garbage\n", encoding="utf-8")
    (root / "facts").mkdir()
    (root / "facts" / "2026-02.md").write_bytes(b"## evt_x store\n\n```yaml\n\xff\xfe: [\n```\n")
    with caplog.at_level(logging.WARNING, logger="almanac.engine.store"):
        workspace.load()
    assert good.id in workspace.notes and len(workspace.logs) == 1
    paths = {p.path for p in workspace.problems}
    assert paths == {"notes/2026/03/14/broken.md", "logs/2026/03/15.md", "facts/2026-02.md"}
    assert "broken.md" in caplog.text and "skipped" in caplog.text
    memory.remember(ME, "and writing still works")


@pytest.mark.req("store:durable")
def test_a_second_engine_on_the_same_directory_is_refused(root: Path, workspace: Workspace) -> None:
    with pytest.raises(WorkspaceLocked, match="another engine"):
        Workspace(root).open()


@pytest.mark.req("store:durable")
def test_writes_fsync_the_file_and_its_directory_before_returning(
    root: Path, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:  # records which file or directory was synced; the real fsync still runs
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    note = memory.remember(ME, "durable note")
    path = str(root / note.path)  # type: ignore[operator]
    assert any(p.startswith(str(root / "notes/2026/03/14/.nte_")) for p in synced)  # the temp file
    assert synced[-1] == str(root / "notes/2026/03/14")  # then its directory, after the rename
    assert not [p for p in (root / "notes").rglob(".*")]  # no temp file left behind
    assert Path(path).is_file()
    synced.clear()
    memory.remember(ME, "x", "s", "p", "o")
    ledger = str(root / "facts" / "2026-03.md")
    assert ledger in synced and synced[-1] == str(root / "facts")  # the new file, then its directory
    assert synced.index(str(root)) < synced.index(ledger)  # the new facts/ directory itself first


@pytest.mark.req("write:no-queue")
def test_a_write_that_cannot_be_made_durable_fails_and_is_never_queued(
    root: Path, memory: Memory, workspace: Workspace
) -> None:
    memory.remember(ME, "first")
    (root / "facts").write_text("not a directory", encoding="utf-8")  # the ledger cannot be written
    before = snapshot(root)
    with pytest.raises(StoreUnavailable, match="nothing was saved"):
        memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")
    assert snapshot(root) == before
    assert workspace.facts.records == {}
    (root / "facts").unlink()
    memory.remember(ME, "another fact", "Fjord", "region", "eu")
    workspace.load()
    assert [r.current.object for r in workspace.facts.records.values() if r.current] == ["eu"]


def test_clock_fixture_moves_forward(clock: Clock) -> None:
    assert clock() < clock()
