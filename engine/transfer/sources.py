"""A folder or a zip file, read as a list of files with safe relative paths.

Symbolic links, and zip entries whose names would land outside the target (absolute paths, ``..``,
backslashes, drive letters), are never read: they come back as :class:`Skipped` with the reason."""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from engine.errors import BadImport


@dataclass(frozen=True)
class Entry:
    path: PurePosixPath  # relative, normalised, no '..'
    size: int
    read: Callable[[], bytes]


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


def safe_path(name: str) -> PurePosixPath | None:
    """``name`` as a relative path that stays inside its folder, or None."""
    drive = len(name) > 1 and name[1] == ":"
    if not name or "\\" in name or "\x00" in name or name.startswith("/") or drive:
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return PurePosixPath(*parts)


@contextmanager
def open_source(source: Path) -> Iterator[tuple[list[Entry], list[Skipped]]]:
    """The files of a folder or a zip (kept open while the caller reads them)."""
    if source.is_dir():
        yield _folder(source)
    elif source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            yield _zip(archive)
    elif not source.exists():
        raise BadImport(f"{source} does not exist; give a folder or a .zip file")
    else:
        raise BadImport(f"{source} is neither a folder nor a zip file")


def _folder(root: Path) -> tuple[list[Entry], list[Skipped]]:
    entries: list[Entry] = []
    skipped: list[Skipped] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames):
            if os.path.islink(os.path.join(dirpath, name)):
                skipped.append(Skipped(_rel(root, dirpath, name), "a symbolic link (not followed)"))
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = _rel(root, dirpath, name)
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                skipped.append(Skipped(rel, "a symbolic link (not followed)"))
            elif not stat.S_ISREG(info.st_mode):
                skipped.append(Skipped(rel, "not a regular file"))
            else:
                entries.append(Entry(PurePosixPath(rel), info.st_size, Path(full).read_bytes))
    return entries, skipped


def _rel(root: Path, dirpath: str, name: str) -> str:
    return Path(dirpath, name).relative_to(root).as_posix()


def _zip(archive: zipfile.ZipFile) -> tuple[list[Entry], list[Skipped]]:
    entries: list[Entry] = []
    skipped: list[Skipped] = []
    for info in archive.infolist():
        if info.is_dir():
            continue
        mode = info.external_attr >> 16
        path = safe_path(info.filename)
        if path is None:
            skipped.append(Skipped(info.filename, "its path would land outside the target folder"))
        elif stat.S_ISLNK(mode):
            skipped.append(Skipped(info.filename, "a symbolic link (not followed)"))
        else:
            entries.append(Entry(path, info.file_size, _reader(archive, info)))
    return entries, skipped


def _reader(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], bytes]:
    return lambda: archive.read(info)
