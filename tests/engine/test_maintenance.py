"""``python -m engine --reindex|--doctor``: offline work on a workspace, refusing what is not one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from engine.memory import Memory
from engine.scope import Caller
from engine.store.workspace import Workspace
from tests.engine.support import engine_command, socket_engine

ME = Caller(client_name="test")


def engine(*args: str, home: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run(
        engine_command(*args),
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def fill(root: Path, notes: int = 12) -> list[str]:
    ws = Workspace(root)
    ws.open()
    try:
        memory = Memory(ws)
        ids = [
            memory.remember(ME, f"note number {i} about the fjord ferry timetable").id for i in range(notes)
        ]
        memory.save_memory(ME, "Fjord", "database", "Postgres")
        memory.remember_note(ME, "a line in today's log")
        return ids
    finally:
        ws.close()


@pytest.mark.req("engine:rebuild", "run:cli")
def test_reindex_rebuilds_with_counts_and_the_doctor_agrees(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    fill(root)
    result = engine("--reindex", "--dir", str(root), "--embedding-provider", "off")
    assert result.returncode == 0, result.stderr
    assert "reindex: read 12 notes, 1 log entries, 1 facts" in result.stderr
    assert "reindex: indexed" in result.stderr and "reindex: done in" in result.stderr
    doctor = engine("--doctor", "--dir", str(root), "--embedding-provider", "off")
    assert doctor.returncode == 0, doctor.stderr
    assert "the index matches the store" in doctor.stderr


@pytest.mark.req("engine:rebuild", "run:cli")
def test_reindex_progress_ends_at_n_of_n_without_repeating_itself(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    fill(root)
    result = engine("--reindex", "--dir", str(root), "--embedding-provider", "local")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    counted = [line for line in lines if line.startswith("reindex: embedded ")]
    total = int(counted[-1].rsplit(" ", 1)[1])
    assert total > 0 and counted[-1] == f"reindex: embedded {total} of {total}"
    assert len(counted) == len(set(counted))  # a line only when the count moved
    assert lines[-1].startswith("reindex: done in")


@pytest.mark.req("run:cli")
def test_doctor_reports_what_differs_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ids = fill(root, notes=3)
    assert engine("--reindex", "--dir", str(root), "--embedding-provider", "off").returncode == 0
    index = root / ".index" / "index.sqlite"
    notes = {p.stem: p for p in (root / "notes").rglob("*.md")}
    notes[ids[0]].unlink()  # removed by hand while no engine ran
    edited = notes[ids[1]]
    edited.write_text(edited.read_text(encoding="utf-8").replace("ferry", "bridge"), encoding="utf-8")
    before = index.read_bytes()
    result = engine("--doctor", "--dir", str(root), "--embedding-provider", "off")
    assert result.returncode == 1
    assert f"1 memories no longer in the store but in the index: {ids[0]}" in result.stderr
    (stale,) = [line for line in result.stderr.splitlines() if "out of date in the index" in line]
    assert ids[1] in stale  # (and its neighbour, whose context named the removed note)
    assert "--reindex" in result.stderr
    assert index.read_bytes() == before


@pytest.mark.req("run:cli")
def test_a_path_that_is_not_a_workspace_is_refused_unless_create(tmp_path: Path) -> None:
    typo = tmp_path / "wrokspace"
    for mode in ("--reindex", "--doctor"):
        result = engine(mode, "--dir", str(typo))
        assert result.returncode == 2 and "does not exist" in result.stderr and "--create" in result.stderr
    assert not typo.exists()
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    result = engine("--reindex", "--dir", str(other))
    assert result.returncode == 2 and "is not an Almanac workspace" in result.stderr
    assert sorted(p.name for p in other.iterdir()) == ["cat.jpg"]
    result = engine("--reindex", "--dir", str(typo), "--create", "--embedding-provider", "off")
    assert result.returncode == 0, result.stderr
    assert (typo / ".index" / "index.sqlite").is_file()


@pytest.mark.req("run:cli")
def test_tilde_in_dir_is_the_home_directory(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    fill(home / "ws", notes=1)
    result = engine("--reindex", "--dir", "~/ws", "--embedding-provider", "off", home=home, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert (home / "ws" / ".index").is_dir() and list(cwd.iterdir()) == []


@pytest.mark.req("run:cli")
def test_a_served_workspace_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    fill(root, notes=1)
    with socket_engine(root, tmp_path / "e.sock"):
        result = engine("--reindex", "--dir", str(root), "--embedding-provider", "off")
    assert result.returncode == 3 and "another engine is serving" in result.stderr
    assert "stop it first" in result.stderr
