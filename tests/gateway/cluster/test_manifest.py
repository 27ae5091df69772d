"""The file-by-file manifest a move copies and checks (``run:scale-out``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from gateway.cluster import manifest, pulls


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


@pytest.mark.req("run:scale-out")
def test_listing_again_finds_every_change_even_one_keeping_size_and_time(tmp_path: Path) -> None:
    """A folder listed pass after pass while an engine writes it: each listing is the folder as it
    is, whatever kept its size and modification time (a write in the clock tick of the hashing)."""
    (tmp_path / "notes").mkdir()
    kept, rewritten, gone = tmp_path / "notes" / "a.md", tmp_path / "b.md", tmp_path / "c.md"
    kept.write_bytes(b"harbour")
    rewritten.write_bytes(b"lantern")
    gone.write_bytes(b"quarry")
    hashes = manifest.Hashes()
    assert hashes.manifest(tmp_path) == manifest.manifest(tmp_path)
    when = rewritten.stat().st_mtime_ns
    rewritten.write_bytes(b"LANTERN")  # the same size …
    os.utime(rewritten, ns=(when, when))  # … and the same modification time
    gone.unlink()
    (tmp_path / "notes" / "d.md").write_bytes(b"meadow")
    again = hashes.manifest(tmp_path)
    assert again == manifest.manifest(tmp_path)
    assert manifest.Entry("b.md", 7, hashlib.sha256(b"LANTERN").hexdigest()) in again
    assert [e.path for e in again] == ["b.md", "notes/a.md", "notes/d.md"]
    assert hashes.manifest(tmp_path / "absent") == ()


@pytest.mark.req("run:scale-out")
def test_a_staging_folder_s_record_follows_what_was_noted_and_dropped(tmp_path: Path) -> None:
    hashes = manifest.Hashes()
    assert hashes.recorded() is None  # nothing known before a first listing
    assert hashes.manifest(tmp_path / "staging") == ()
    (tmp_path / "staging").mkdir()
    (tmp_path / "staging" / "a.md").write_bytes(b"orchard")
    hashes.note(tmp_path / "staging", "a.md", hashlib.sha256(b"orchard").hexdigest())
    (tmp_path / "staging" / "b.md").write_bytes(b"kiln")
    hashes.note(tmp_path / "staging", "b.md", hashlib.sha256(b"kiln").hexdigest())
    (tmp_path / "staging" / "b.md").unlink()
    hashes.drop(("b.md",))
    assert hashes.recorded() == manifest.manifest(tmp_path / "staging")


@pytest.mark.req("run:scale-out")
def test_a_large_file_is_listed_by_block_and_only_changed_blocks_are_fetched_again(tmp_path: Path) -> None:
    """A SQLite index changes in places: a pass copies the blocks that differ, not the whole file."""
    big = tmp_path / "index.sqlite"
    data = bytearray(os.urandom(manifest.BLOCKED + 3 * manifest.BLOCK + 10))
    big.write_bytes(bytes(data))
    (before,) = manifest.Hashes().manifest(tmp_path)
    assert len(before.blocks) == len(data) // manifest.BLOCK + 1
    data[5] ^= 1  # block 0
    data[2 * manifest.BLOCK] ^= 1  # block 2 …
    data[3 * manifest.BLOCK + 1] ^= 1  # … and 3, one span with it
    data += b"grown"  # the last block, longer
    big.write_bytes(bytes(data))
    (after,) = manifest.Hashes().manifest(tmp_path)
    assert after == manifest.Entry("index.sqlite", len(data), hashlib.sha256(bytes(data)).hexdigest())
    last = (len(before.blocks) - 1) * manifest.BLOCK
    assert pulls.changed_spans(after, before) == [
        (0, manifest.BLOCK),
        (2 * manifest.BLOCK, 2 * manifest.BLOCK),
        (last, len(data) - last),
    ]
    assert pulls.changed_spans(after, after) == []
    assert manifest.from_json(manifest.to_json((after,)))[0].blocks == after.blocks
    small = manifest.Entry("a.md", 3, "x")
    assert manifest.to_json((small,)) == [{"path": "a.md", "size": 3, "sha256": "x"}]
