"""The file-by-file manifest a move copies and checks (issue 15 item 3)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gateway.cluster import manifest


@pytest.mark.req("run:scale-out")
def test_a_manifest_lists_every_file_with_its_size_and_sha256(tmp_path: Path) -> None:
    (tmp_path / "facts" / "2026").mkdir(parents=True)
    (tmp_path / "facts" / "2026" / "a.md").write_bytes(b"kiln")
    (tmp_path / "log.md").write_bytes(b"")
    found = manifest.manifest(tmp_path)
    assert found == (
        manifest.Entry("facts/2026/a.md", 4, hashlib.sha256(b"kiln").hexdigest()),
        manifest.Entry("log.md", 0, hashlib.sha256(b"").hexdigest()),
    )
    assert manifest.from_json(manifest.to_json(found)) == found


@pytest.mark.req("run:scale-out")
def test_differences_name_every_missing_extra_or_changed_file() -> None:
    a = manifest.Entry("a.md", 1, "x")
    b = manifest.Entry("b.md", 1, "y")
    changed = manifest.Entry("b.md", 1, "z")
    extra = manifest.Entry("c.md", 2, "w")
    assert manifest.differences((a, b), (a, b)) == []
    assert manifest.differences((a, b), (changed, extra)) == [
        "missing: a.md",
        "unexpected: c.md",
        "differs: b.md",
    ]


@pytest.mark.parametrize(
    "raw",
    [
        {"path": "a.md"},
        [{"path": "../../etc/passwd", "size": 1, "sha256": "x"}],
        [{"path": "/etc/passwd", "size": 1, "sha256": "x"}],
        [{"path": "", "size": 1, "sha256": "x"}],
        [{"path": "a.md", "size": "1", "sha256": "x"}],
        ["a.md"],
    ],
)
def test_a_manifest_from_another_node_never_leaves_the_folder(raw: object) -> None:
    with pytest.raises(ValueError):
        manifest.from_json(raw)
