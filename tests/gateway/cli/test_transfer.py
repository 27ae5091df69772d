"""``almanac import`` / ``almanac export`` on an owner's workspace (life:import, life:export)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.engine.support import socket_engine

ALMANAC = str(Path(sys.executable).parent / "almanac")
OWNER = "ada@example.com"


def almanac(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ALMANAC, *args], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


@pytest.mark.req("life:import", "life:export", "run:cli")
def test_import_then_export_an_owners_workspace(tmp_path: Path) -> None:
    d = str(tmp_path / "data")
    vault = tmp_path / "vault"
    (vault / "Daily").mkdir(parents=True)
    (vault / "Daily" / "2026-11-30.md").write_text("Met [[Ada]] about the fjord.\n", encoding="utf-8")
    (vault / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    assert almanac("owner", "create", OWNER, "--data-dir", d).returncode == 0
    done = almanac("import", str(vault), "--label", "Vault", "--owner", OWNER, "--data-dir", d)
    assert done.returncode == 0, done.stderr
    assert "imported 1 notes into notes/Imported/Vault/" in done.stderr and "skipped photo.jpg" in done.stderr
    assert "import: 2 files found in" in done.stderr and "import: copied 1 of 1 files" in done.stderr
    (folder,) = (tmp_path / "data" / "workspaces").iterdir()
    assert (folder / "notes" / "Imported" / "Vault" / "Daily" / "2026-11-30.md").is_file()

    out = tmp_path / "backup.zip"
    done = almanac("export", str(out), "--owner", OWNER, "--data-dir", d)
    assert done.returncode == 0, done.stderr
    assert "notes/Imported/Vault/Daily/2026-11-30.md" in zipfile.ZipFile(out).namelist()

    copy = tmp_path / "copy"
    done = almanac("import", str(out), str(copy), "--create")
    assert done.returncode == 0, done.stderr
    imported = copy / "notes" / "Imported" / "Vault" / "Daily" / "2026-11-30.md"
    assert imported.read_text(encoding="utf-8") == "Met [[Ada]] about the fjord.\n"

    with socket_engine(folder, tmp_path / "e.sock"):  # the workspace's engine is running
        busy = almanac("import", str(vault), "--label", "Again", "--owner", OWNER, "--data-dir", d)
    assert (
        busy.returncode == 3 and "another engine is serving" in busy.stderr and "stop it first" in busy.stderr
    )
    assert "on the Workspace page of the site (/workspace)" in busy.stderr  # where it works meanwhile
    assert not (folder / "notes" / "Imported" / "Again").exists()
