"""Import a folder or zip of Markdown (``life:import``): each file becomes a note under
``notes/Imported/<label>/<its path>``, byte for byte; everything else is skipped and reported."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from engine.index.indexer import MAX_ITEM_BYTES as MAX_FILE_BYTES
from engine.store.workspace import Workspace
from tests.engine.support import engine_command, socket_engine

NOTE = (
    "---\ntags: [garden]\naliases: [Kelp]\n---\n# Kelp\n\n"
    "Grows fast. See [[Fjord deploys]] and [[Tides|the tides]].\n"
)


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        engine_command(*args), capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


def vault(root: Path) -> Path:
    """An Obsidian-like vault with one of every kind of file an import must handle."""
    (root / "Projects" / "Fjord").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / "Kelp.md").write_text(NOTE, encoding="utf-8")
    (root / "Projects" / "Fjord" / "deploys.markdown").write_text("Deploy on Tuesdays.\n", encoding="utf-8")
    (root / ".obsidian" / "app.json").write_text("{}", encoding="utf-8")
    (root / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (root / "binary.md").write_bytes(b"text\x00more")
    (root / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (root / "huge.md").write_text("x" * (MAX_FILE_BYTES + 1), encoding="utf-8")
    (root / "broken.md").write_text("---\ntags: [a\n", encoding="utf-8")
    os.symlink(root / "Kelp.md", root / "link.md")
    return root


def notes_under(root: Path, label: str) -> dict[str, str]:
    ws = Workspace(root)
    ws.open()
    try:
        return {
            str(r.rel): r.note.body for r in ws.notes.values() if str(r.rel).startswith(f"Imported/{label}/")
        }
    finally:
        ws.close()


@pytest.mark.req("life:import")
def test_a_folder_of_markdown_becomes_notes_and_the_rest_is_reported(tmp_path: Path) -> None:
    source, ws = vault(tmp_path / "vault"), tmp_path / "ws"
    result = engine("--import", str(source), "--label", "Obsidian 2026", "--dir", str(ws), "--create")
    assert result.returncode == 0, result.stderr
    target = ws / "notes" / "Imported" / "Obsidian 2026"
    assert (target / "Kelp.md").read_text(encoding="utf-8") == NOTE  # frontmatter and wikilinks kept
    assert (target / "Projects" / "Fjord" / "deploys.md").read_text(
        encoding="utf-8"
    ) == "Deploy on Tuesdays.\n"
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == [
        "Kelp.md",
        "Projects/Fjord/deploys.md",
    ]
    err = result.stderr
    assert "import: imported 2 notes into notes/Imported/Obsidian 2026/" in err
    for name, reason in [
        (".obsidian/app.json", "hidden"),
        ("diagram.png", "not Markdown"),
        ("binary.md", "binary"),
        ("latin1.md", "not UTF-8"),
        ("huge.md", "larger than"),
        ("broken.md", "unreadable frontmatter"),
        ("link.md", "symbolic link"),
    ]:
        assert any(
            line.startswith(f"import: skipped {name}: ") and reason in line for line in err.splitlines()
        ), name
    assert "import: skipped 7 files" in err and "import: copied 2 of 2 files" in err
    notes = notes_under(ws, "Obsidian 2026")
    assert set(notes) == {
        "Imported/Obsidian 2026/Kelp.md",
        "Imported/Obsidian 2026/Projects/Fjord/deploys.md",
    }
    assert "[[Fjord deploys]]" in notes["Imported/Obsidian 2026/Kelp.md"]


@pytest.mark.req("life:import")
def test_a_zip_cannot_write_outside_its_folder(tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("notes/ok.md", "fine\n")
        z.writestr("../escape.md", "out\n")
        z.writestr("/etc/abs.md", "out\n")
        z.writestr("a/../../up.md", "out\n")
    ws = tmp_path / "ws"
    result = engine("--import", str(archive), "--label", "zip", "--dir", str(ws), "--create")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.rglob("*.md")) == ["ok.md"]
    assert (ws / "notes" / "Imported" / "zip" / "notes" / "ok.md").is_file()
    assert result.stderr.count("its path would land outside the target folder") == 3


@pytest.mark.req("life:import")
def test_bad_labels_a_used_label_and_a_served_workspace_change_nothing(tmp_path: Path) -> None:
    source, ws = vault(tmp_path / "vault"), tmp_path / "ws"
    for label in ("../up", "a/b", "", ".hidden", "x" * 65):
        result = engine("--import", str(source), "--label", label, "--dir", str(ws), "--create")
        assert result.returncode == 2 and "bad label" in result.stderr, label
    assert not ws.exists()  # the label is refused before anything is created
    assert engine("--import", str(source), "--label", "v", "--dir", str(ws), "--create").returncode == 0
    before = sorted(p for p in ws.rglob("*") if p.is_file() and ".index" not in p.parts)
    result = engine("--import", str(source), "--label", "v", "--dir", str(ws))
    assert result.returncode == 2 and "already exists; choose another label" in result.stderr
    result = engine("--import", str(source), "--dir", str(ws))
    assert result.returncode == 2 and "needs --label" in result.stderr
    with socket_engine(ws, tmp_path / "e.sock"):
        result = engine("--import", str(source), "--label", "w", "--dir", str(ws))
    assert result.returncode == 3 and "another engine is serving" in result.stderr
    after = sorted(p for p in ws.rglob("*") if p.is_file() and ".index" not in p.parts)
    assert [p for p in after if "Imported" in p.parts] == [p for p in before if "Imported" in p.parts]
