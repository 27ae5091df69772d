"""What ``almanac workspace restore`` restores from (``run:scale-out``): a backup folder (a copy of the
workspace's folder, from a volume snapshot or a sync) or an owner's export (the zip ``almanac
export`` and the dashboard's Export produce: every file of the store plus ``almanac-export.json``,
which lists each file's size and SHA-256 — docs/cli.md, ``almanac export``).

Everything is checked before anything is sent: a folder must hold files; an export must be a zip
holding an Almanac export manifest of a format this gateway reads, naming this workspace (when it
names one), whose files are exactly the manifest's, each inside the workspace's folder (no
absolute path, no ``..``, no link), each of the size and SHA-256 the manifest gives. A refusal says
what is wrong and changes nothing.

Each file is then read in chunks of at most :data:`CHUNK` bytes, hashed as it goes
(:class:`Chunks`): a restore never holds a whole file in memory, and a file that changed while it
was read is caught.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gateway.cluster import manifest
from gateway.errors import BadRequest, MoveFailed

#: The most a restore reads of a file at once (bytes).
CHUNK = 1 << 20
#: What an export never holds (engine/transfer/archive.py leaves them out): the derived index and
#: caches, and the lock of the engine serving the folder.
NOT_EXPORTED = (".index", ".cache", ".almanac.lock")
#: The export's own manifest (engine/transfer/archive.py writes it; not a file of the store).
EXPORT_MANIFEST = "almanac-export.json"
EXPORT_FORMAT, EXPORT_VERSION = "almanac-export", 1


@dataclass(frozen=True)
class Backup:
    """The files to restore and how to read each one."""

    where: Path
    kind: str  # "folder" or "export"
    entries: tuple[manifest.Entry, ...]
    reader: Callable[[manifest.Entry], IO[bytes]]

    def open(self, entry: manifest.Entry) -> IO[bytes]:
        return self.reader(entry)


class Chunks:
    """The file's bytes in chunks of at most ``size`` bytes, hashed as they are read; :meth:`check`
    afterwards raises :class:`MoveFailed` unless they were exactly the entry's size and SHA-256.
    ``largest`` is the largest read made (a test's memory bound)."""

    def __init__(self, stream: IO[bytes], entry: manifest.Entry, size: int = CHUNK) -> None:
        self.stream, self.entry, self.size = stream, entry, size
        self.hash, self.read, self.largest, self.done = hashlib.sha256(), 0, 0, False

    def __iter__(self) -> Iterator[bytes]:
        while chunk := self.stream.read(self.size):
            self.largest = max(self.largest, len(chunk))
            self.read += len(chunk)
            self.hash.update(chunk)
            yield chunk
        self.done = True

    def check(self) -> None:
        if (self.read, self.hash.hexdigest()) != (self.entry.size, self.entry.sha256):
            raise MoveFailed(
                f"{self.entry.path} changed while it was sent (read {self.read} bytes, expected "
                f"{self.entry.size}); make sure nothing writes to the backup, and run the restore again"
            )


@contextlib.contextmanager
def open_backup(where: Path, workspace_id: str) -> Iterator[Backup]:
    """The backup at ``where`` — a folder or an export zip — checked (:class:`BadRequest`
    otherwise, nothing changed); open while the context lasts."""
    if where.is_dir():
        entries = manifest.manifest(where)
        if not entries:
            raise BadRequest(f"{where} holds no files: it is not a backup of a workspace (nothing changed)")
        yield Backup(where, "folder", entries, lambda entry: (where / entry.path).open("rb"))
        return
    if not where.is_file():
        raise BadRequest(
            f"{where} is neither a folder nor a file; give the backup copy of the workspace's folder or "
            "the owner's export (.zip) (nothing changed)"
        )
    if not zipfile.is_zipfile(where):
        raise BadRequest(
            f"{where} is not a zip file: give an owner's export (the .zip `almanac export` writes) or a "
            "backup folder (nothing changed)"
        )
    with zipfile.ZipFile(where) as archive:
        entries = export_entries(archive, workspace_id, where)
        yield Backup(where, "export", entries, lambda entry: archive.open(entry.path))


def export_entries(archive: zipfile.ZipFile, workspace_id: str, where: Path) -> tuple[manifest.Entry, ...]:
    """The store files of an Almanac export, every one checked against its manifest (read whole,
    in chunks) before the restore sends any; :class:`BadRequest` names the first problem."""

    def refuse(problem: str) -> BadRequest:
        return BadRequest(f"{where} cannot be restored: {problem} (nothing changed)")

    members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
    if EXPORT_MANIFEST not in members:
        raise refuse(f"it holds no {EXPORT_MANIFEST}, so it is not an Almanac export")
    try:
        described: Any = json.loads(archive.read(EXPORT_MANIFEST))
    except ValueError as exc:
        raise refuse(f"its {EXPORT_MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(described, dict) or described.get("format") != EXPORT_FORMAT:
        raise refuse(f"its {EXPORT_MANIFEST} is not an Almanac export manifest")
    if described.get("version") != EXPORT_VERSION:
        raise refuse(
            f"it is an export of format version {described.get('version')!r}; this gateway reads "
            f"version {EXPORT_VERSION}"
        )
    named = described.get("workspace")
    if named is not None and named != workspace_id:
        raise refuse(f"it is the export of workspace {named!r}, not of {workspace_id!r}")
    try:
        listed = manifest.from_json(
            [
                {"path": f.get("path"), "size": f.get("bytes"), "sha256": f.get("sha256")}
                for f in described.get("files", [])
                if isinstance(f, dict)
            ]
        )
    except ValueError as exc:
        raise refuse(f"its {EXPORT_MANIFEST}: {exc}") from None
    if len(listed) != len(described.get("files", [])):
        raise refuse(f"its {EXPORT_MANIFEST} lists something other than files")
    for name, info in members.items():
        if not manifest.safe_relative(name):
            raise refuse(f"{name!r} would be written outside the workspace's folder")
        if name.split("/", 1)[0] in NOT_EXPORTED:
            raise refuse(f"{name!r} is derived data or the engine's own file, which an export never holds")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise refuse(f"{name!r} is a symbolic link")
    stored = set(members) - {EXPORT_MANIFEST}
    problems = manifest.differences(
        listed, tuple(manifest.Entry(n, members[n].file_size, "") for n in sorted(stored))
    )
    missing = [p for p in problems if not p.startswith("differs: ")]
    if missing:
        raise refuse(f"its files do not match its manifest ({missing[0]})")
    for entry in listed:
        if members[entry.path].file_size != entry.size:
            size = members[entry.path].file_size
            raise refuse(f"{entry.path} is {size} bytes, its manifest says {entry.size}")
        with archive.open(entry.path) as stream:
            chunks = Chunks(stream, entry)
            for _ in chunks:
                pass
        try:
            chunks.check()
        except MoveFailed:
            raise refuse(f"{entry.path} does not match its SHA-256 in the manifest (damaged)") from None
    return listed
