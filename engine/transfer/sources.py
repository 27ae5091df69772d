"""A folder or a zip file, read as a list of files with safe relative paths.

Symbolic links, and zip entries whose names would land outside the target (absolute paths, ``..``,
backslashes, drive letters) or are too long or deep (:mod:`engine.transfer.limits`), are never
read: they come back as :class:`Skipped` with the reason. A zip listing more entries than
:attr:`~engine.transfer.limits.Limits.members` is refused before its directory is read, and one
whose directory is damaged is refused (:class:`BadImport`). An entry is read through ``open``,
in chunks (:func:`engine.transfer.limits.stream`), never whole on trust of its declared size."""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from engine.errors import BadImport
from engine.transfer.limits import DAMAGED, Limits, check_members, path_problem, zip_entry_count


@dataclass(frozen=True)
class Entry:
    path: PurePosixPath  # relative, normalised, no '..'
    size: int  # as declared (a zip's header may lie): never trusted for a bound
    open: Callable[[], IO[bytes]]


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
def open_source(source: Path, limits: Limits) -> Iterator[tuple[list[Entry], list[Skipped]]]:
    """The files of a folder or a zip (kept open while the caller reads them)."""
    if source.is_dir():
        yield _folder(source)
    elif source.is_file() and zipfile.is_zipfile(source):
        check_members(zip_entry_count(source, limits.members), limits)
        try:
            archive = zipfile.ZipFile(source)
        except (*DAMAGED, OSError) as exc:
            raise BadImport(f"the zip's directory cannot be read ({exc}); nothing was written") from None
        with archive:
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
                entries.append(Entry(PurePosixPath(rel), info.st_size, _opener(full)))
    return entries, skipped


def _opener(full: str) -> Callable[[], IO[bytes]]:
    return lambda: open(full, "rb")


def _rel(root: Path, dirpath: str, name: str) -> str:
    return Path(dirpath, name).relative_to(root).as_posix()


def _zip(archive: zipfile.ZipFile) -> tuple[list[Entry], list[Skipped]]:
    entries: list[Entry] = []
    skipped: list[Skipped] = []
    for info in archive.infolist():
        if info.filename.endswith("/"):  # a folder (ZipInfo.is_dir fails on an empty name)
            continue
        if not info.filename:
            skipped.append(Skipped("(no name)", "a member of the zip has no name"))
            continue
        mode = info.external_attr >> 16
        path = safe_path(info.filename)
        too_long = path_problem(info.filename)
        if path is None:
            skipped.append(Skipped(info.filename, "its path would land outside the target folder"))
        elif too_long is not None:
            skipped.append(Skipped(info.filename[:200], too_long))
        elif stat.S_ISLNK(mode):
            skipped.append(Skipped(info.filename, "a symbolic link (not followed)"))
        else:
            entries.append(Entry(path, info.file_size, _reader(archive, info)))
    return entries, skipped


def _reader(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], IO[bytes]]:
    return lambda: archive.open(info)
