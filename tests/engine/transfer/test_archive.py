"""Export a workspace and import it into a new one: every memory comes back, history included
(``life:export``); a damaged export or a non-empty target changes nothing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from engine.memory import Memory
from engine.scope import Caller
from engine.store.workspace import Workspace
from tests.engine.support import engine_command, socket_engine

ME = Caller(connection="laptop", client_name="test")


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        engine_command(*args), capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


def fill(root: Path) -> None:
    ws = Workspace(root)
    ws.open()
    try:
        memory = Memory(ws)
        memory.save_memory(ME, "Fjord", "database", "MySQL")
        memory.save_memory(ME, "Fjord", "database", "Postgres")  # supersedes: history
        kept = memory.save_memory(ME, "Kelp", "region", "eu-west-1", scope="project:kelp")
        memory.retire(ME, kept.id, "moved")
        memory.remember(ME, "The staging database lives on kelp. See [[Fjord deploys]].", tags=["infra"])
        note = memory.remember(ME, "a note that was retired")
        memory.retire(ME, note.id, "obsolete")
        memory.remember_note(ME, "deployed fjord to staging")
    finally:
        ws.close()


def everything(root: Path) -> dict[str, Any]:
    """Every memory of a workspace as the engine reads it: facts with their whole history, notes
    and log entries with their state and place."""
    ws = Workspace(root)
    ws.open()
    try:
        return {
            "facts": {k: repr(v) for k, v in ws.facts.records.items()},
            "notes": {k: repr(v) for k, v in ws.notes.items()},
            "logs": {k: repr(v) for k, v in ws.logs.items()},
            "problems": list(ws.problems),
        }
    finally:
        ws.close()


def store_bytes(root: Path) -> dict[str, bytes]:
    skip = (".index", ".cache", ".almanac.lock")
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not str(p.relative_to(root)).startswith(skip)
    }


@pytest.mark.req("life:export", "life:import")
def test_export_then_import_into_a_new_workspace_reproduces_every_memory(tmp_path: Path) -> None:
    source, copy, out = tmp_path / "ws", tmp_path / "copy", tmp_path / "ws.zip"
    fill(source)
    before = everything(source)
    assert before["facts"] and before["notes"] and before["logs"] and not before["problems"]
    result = engine("--export", str(out), "--dir", str(source))
    assert result.returncode == 0, result.stderr
    assert "export: written" in result.stderr and f"export: wrote {out}" in result.stderr
    names = zipfile.ZipFile(out).namelist()
    manifest = json.loads(zipfile.ZipFile(out).read("almanac-export.json"))
    assert manifest["counts"] == {"notes": 2, "retired_notes": 1, "log_entries": 1, "facts": 2}
    assert not [n for n in names if n.startswith((".index", ".almanac.lock"))]

    result = engine("--import", str(out), "--dir", str(copy), "--create")
    assert result.returncode == 0, result.stderr
    assert "import: restored 2 notes, 1 log entries, 2 facts" in result.stderr
    assert everything(copy) == before
    assert store_bytes(copy) == store_bytes(source)

    # and the restored workspace answers as the original: the current value, then its history
    answers = []
    for root in (source, copy):
        ws = Workspace(root)
        ws.open()
        try:
            found = Memory(ws).retrieve(ME, subject="Fjord", include_history=True)
        finally:
            ws.close()
        answers.append([(f.object, f.current) for f in found.facts])
    assert answers[0] == answers[1] == [("Postgres", True), ("MySQL", False)]


@pytest.mark.req("life:export", "life:import")
def test_a_restore_refuses_a_workspace_with_memories_and_a_damaged_export(tmp_path: Path) -> None:
    source, other, out = tmp_path / "ws", tmp_path / "other", tmp_path / "ws.zip"
    fill(source)
    assert engine("--export", str(out), "--dir", str(source)).returncode == 0
    fill(other)
    before = store_bytes(other)
    result = engine("--import", str(out), "--dir", str(other))
    assert result.returncode == 2 and "already holds memories" in result.stderr
    assert store_bytes(other) == before

    damaged = tmp_path / "damaged.zip"
    with zipfile.ZipFile(out) as good, zipfile.ZipFile(damaged, "w") as bad:
        for info in good.infolist():
            data = good.read(info)
            bad.writestr(
                info, data.replace(b"Postgres", b"Postgrez") if info.filename.startswith("facts/") else data
            )
    result = engine("--import", str(damaged), "--dir", str(tmp_path / "new"), "--create")
    assert result.returncode == 2 and "does not match the manifest" in result.stderr
    assert not list((tmp_path / "new").glob("*/**/*.md"))


@pytest.mark.req("life:export")
def test_export_refuses_an_existing_file_and_a_served_workspace(tmp_path: Path) -> None:
    source, out = tmp_path / "ws", tmp_path / "ws.zip"
    fill(source)
    out.write_bytes(b"precious")
    result = engine("--export", str(out), "--dir", str(source))
    assert result.returncode == 2 and "already exists" in result.stderr and out.read_bytes() == b"precious"
    with socket_engine(source, tmp_path / "e.sock"):
        result = engine("--export", str(tmp_path / "new.zip"), "--dir", str(source))
    assert result.returncode == 3 and "another engine is serving" in result.stderr
    assert not (tmp_path / "new.zip").exists()


@pytest.mark.req("life:import")
def test_a_restore_refuses_an_export_carrying_derived_data(tmp_path: Path) -> None:
    """An export never holds ``.index/``, ``.cache/`` or the lock; one that does (made by hand, its
    manifest matching) could plant a memo or an index the engine would trust: refused, nothing written."""
    source, out = tmp_path / "ws", tmp_path / "ws.zip"
    fill(source)
    assert engine("--export", str(out), "--dir", str(source)).returncode == 0
    for planted in (".cache/store-yaml.json", ".index/index.sqlite", ".almanac.lock"):
        crafted = tmp_path / "crafted.zip"
        data = b'{"format": 1, "blocks": {}}'
        with zipfile.ZipFile(out) as good, zipfile.ZipFile(crafted, "w") as bad:
            manifest = json.loads(good.read("almanac-export.json"))
            manifest["files"].append(
                {"path": planted, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            )
            for info in good.infolist():
                if info.filename != "almanac-export.json":
                    bad.writestr(info, good.read(info))
            bad.writestr(planted, data)
            bad.writestr("almanac-export.json", json.dumps(manifest))
        target = tmp_path / f"new-{planted.strip('.').replace('/', '-')}"
        result = engine("--import", str(crafted), "--dir", str(target), "--create")
        assert result.returncode == 2 and f"the export holds {planted}" in result.stderr, result.stderr
        assert not list(target.glob("*/**/*.md"))
        assert (
            not (target / planted).is_file() or (target / planted).read_bytes() != data
        )  # the lock is the engine's
