"""``almanac engine reindex|doctor`` run the engine's own command line on a workspace folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ALMANAC = str(Path(sys.executable).parent / "almanac")


def almanac(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ALMANAC, *args], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


@pytest.mark.req("run:cli")
def test_reindex_and_doctor_by_owner_or_folder(tmp_path: Path) -> None:
    d = str(tmp_path / "data")
    assert almanac("owner", "create", "ada@example.com", "--data-dir", d).returncode == 0
    refused = almanac("engine", "reindex", "--owner", "ada@example.com", "--data-dir", d)
    assert refused.returncode == 2 and "--create" in refused.stderr  # the folder does not exist yet
    created = almanac("engine", "reindex", "--owner", "ada@example.com", "--create", "--data-dir", d)
    assert created.returncode == 0, created.stderr
    assert "reindex: read 0 notes, 0 log entries, 0 facts" in created.stderr
    (folder,) = (tmp_path / "data" / "workspaces").iterdir()
    doctor = almanac("engine", "doctor", str(folder))
    assert doctor.returncode == 0 and "the index matches the store" in doctor.stderr
    both = almanac("engine", "doctor", str(folder), "--owner", "ada@example.com", "--data-dir", d)
    assert both.returncode != 0 and both.stderr.startswith("error: give either")
    typo = almanac("engine", "doctor", str(tmp_path / "nope"))
    assert typo.returncode == 2 and "does not exist" in typo.stderr and not (tmp_path / "nope").exists()
