"""What a restore reads (``run:scale-out``): a backup folder or an owner's export zip,
checked before anything is sent — every refusal names what is wrong — and read in bounded chunks,
hashed as they go (:mod:`gateway.cluster.backups`). Real files and real zips in a temporary folder."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gateway.cluster import backups, manifest
from gateway.errors import BadRequest, MoveFailed

WS = "ws_0123456789abcdef"


def _export(target: Path, files: dict[str, bytes], **override: Any) -> Path:
    """A zip laid out as ``almanac export`` writes one (``override`` changes its manifest)."""
    described: dict[str, Any] = {
        "format": "almanac-export",
        "version": 1,
        "workspace": WS,
        "exported_at": "2026-12-01T22:00:00Z",
        "counts": {},
        "files": [
            {"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in sorted(files.items())
        ],
    }
    described.update(override)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("almanac-export.json", json.dumps(described))
    return target


FILES = {
    "facts/2026-12.md": b"# Facts\n\nthe harbour opens at dawn\n",
    "notes/2026/12/01/nte_1.md": b"a note\n",
    "settings.json": b"{}\n",
}


@pytest.mark.req("run:scale-out")
def test_a_file_larger_than_a_chunk_is_read_in_bounded_chunks_and_hashed_as_it_goes(tmp_path: Path) -> None:
    data = bytes(range(256)) * ((3 * 4096 + 17) // 256 + 1)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    (entry,) = manifest.manifest(tmp_path)
    with path.open("rb") as stream:
        chunks = backups.Chunks(stream, entry, size=4096)
        got = list(chunks)
    assert b"".join(got) == data and len(got) == len(data) // 4096 + 1
    assert chunks.largest == 4096 and all(len(c) <= 4096 for c in got)
    chunks.check()  # size and SHA-256 as listed
    assert backups.CHUNK == 1 << 20  # what a restore reads of a file at once
    # the file changed after it was listed: caught once read
    path.write_bytes(data[:-1] + b"!")
    with path.open("rb") as stream:
        changed = backups.Chunks(stream, entry, size=4096)
        assert b"".join(changed) != data
    with pytest.raises(MoveFailed, match=r"big\.bin changed while it was sent"):
        changed.check()


@pytest.mark.req("run:scale-out")
def test_a_backup_folder_or_an_export_is_read_file_by_file(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    for name, data in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    zipped = _export(tmp_path / "export.zip", FILES)
    for where, kind in ((folder, "folder"), (zipped, "export")):
        with backups.open_backup(where, WS) as backup:
            assert backup.kind == kind
            assert [e.path for e in backup.entries] == sorted(FILES)  # not the export's manifest
            for entry in backup.entries:
                with backup.open(entry) as stream:
                    assert stream.read() == FILES[entry.path]
                assert entry.sha256 == hashlib.sha256(FILES[entry.path]).hexdigest()
    # an export made before exports named their workspace is read too
    with backups.open_backup(_export(tmp_path / "unnamed.zip", FILES, workspace=None), WS) as backup:
        assert len(backup.entries) == 3


def _refused(where: Path, match: str) -> None:
    with pytest.raises(BadRequest, match=match) as caught, backups.open_backup(where, WS):
        pass
    assert "nothing changed" in caught.value.message


@pytest.mark.req("run:scale-out")
def test_what_is_not_a_restorable_backup_is_refused_naming_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _refused(tmp_path / "empty", "holds no files")
    _refused(tmp_path / "nowhere", "neither a folder nor a file")
    (tmp_path / "notes.txt").write_text("not a zip")
    _refused(tmp_path / "notes.txt", "is not a zip file")
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as archive:
        archive.writestr("notes/a.md", "a Markdown file, but no export")
    _refused(plain, "holds no almanac-export.json, so it is not an Almanac export")
    _refused(_export(tmp_path / "f.zip", FILES, format="something-else"), "not an Almanac export manifest")
    _refused(_export(tmp_path / "v.zip", FILES, version=7), "format version 7; this gateway reads version 1")
    _refused(
        _export(tmp_path / "other.zip", FILES, workspace="ws_ffffffffffffffff"),
        "export of workspace 'ws_ffffffffffffffff', not of 'ws_0123456789abcdef'",
    )
    escape = {**FILES, "../outside.md": b"escaped"}
    _refused(_export(tmp_path / "escape.zip", escape), "outside.md' leaves the workspace's folder")
    absolute = {**FILES, "/etc/cron.d/evil": b"* * * * * root true"}
    _refused(_export(tmp_path / "absolute.zip", absolute), "leaves the workspace's folder")
    extra = _export(tmp_path / "extra.zip", FILES)
    with zipfile.ZipFile(extra, "a") as archive:
        archive.writestr("notes/unlisted.md", "not in the manifest")
    _refused(extra, r"do not match its manifest \(unexpected: notes/unlisted.md\)")
    link = _export(tmp_path / "link.zip", FILES)
    with zipfile.ZipFile(link, "a") as archive:
        info = zipfile.ZipInfo("notes/link.md")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/passwd")
    _refused(link, "notes/link.md' is a symbolic link")
    damaged = tmp_path / "damaged.zip"
    good = io.BytesIO(_export(tmp_path / "good.zip", FILES).read_bytes())
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(damaged, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            out.writestr(info, data.replace(b"dawn", b"dusk") if info.filename.startswith("facts/") else data)
    _refused(damaged, "facts/2026-12.md does not match its SHA-256")
