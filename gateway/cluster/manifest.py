"""What a workspace's folder holds, file by file, to copy it between nodes and prove the copy
(``run:scale-out``): each regular file's path (relative, ``/``-separated), size and SHA-256.

:class:`Hashes` lists a folder again and again while a move copies it — the source's while its
engine still writes, the target's staging folder after each pass — hashing again only the files
that may have changed since it last hashed them: those whose size, modification and change times or
inode differ, and those modified less than :data:`RACY_NS` before they were hashed (a write in the
same clock tick as the hash could leave every one of those the same; git calls them "racy")."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

_CHUNK = 1 << 20
#: A file larger than this is listed block by block too (bytes) …
BLOCKED = 1 << 20
#: … in blocks of this size: what a pass copies of a large file that changed in places (a SQLite index).
BLOCK = 1 << 16
#: A file modified this shortly before it was hashed is hashed again next time (nanoseconds).
RACY_NS = 1_000_000_000


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    sha256: str
    # a large file's blocks (:data:`BLOCK` bytes each), by digest: a pass copies only those that differ
    blocks: tuple[str, ...] = field(default=(), compare=False)


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def digests(path: Path) -> tuple[str, tuple[str, ...]]:
    """The file's SHA-256 and, if it is larger than :data:`BLOCKED`, the digest of each of its
    :data:`BLOCK`-byte blocks (read once)."""
    h, blocks, size = hashlib.sha256(), [], 0
    with path.open("rb") as f:
        while chunk := f.read(BLOCK):
            h.update(chunk)
            blocks.append(block_digest(chunk))
            size += len(chunk)
    return h.hexdigest(), tuple(blocks) if size > BLOCKED else ()


def block_digest(chunk: bytes) -> str:
    return hashlib.sha256(chunk).hexdigest()[:32]


def manifest(root: Path) -> tuple[Entry, ...]:
    """Every regular file under ``root`` (sockets and other special files are not data), sorted."""
    found = [
        Entry(p.relative_to(root).as_posix(), p.stat().st_size, digest(p))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    ]
    return tuple(sorted(found, key=lambda e: e.path))


@dataclass(frozen=True)
class _Hashed:
    stamp: tuple[int, int, int, int]  # size, mtime, ctime (ns), inode when it was hashed
    sha256: str
    trusted: bool  # not modified within RACY_NS of its hashing: the same stamp means the same bytes
    blocks: tuple[str, ...] = ()


def _stamp(found: os.stat_result) -> tuple[int, int, int, int]:
    return (found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino)


class Hashes:
    """A folder's manifest, listed again and again, each file hashed again only if it may have
    changed (see the module's doc). One per folder; not shared between threads."""

    def __init__(self) -> None:
        self._known: dict[str, _Hashed] = {}
        self.listed = False

    def manifest(self, root: Path) -> tuple[Entry, ...]:
        """Every regular file under ``root`` (as :func:`manifest`), sorted; nothing if it is absent."""
        for _ in range(3):
            try:
                return self._list(root)
            except FileNotFoundError:  # a folder removed while it was walked: walk again
                continue
        return self._list(root)

    def _list(self, root: Path) -> tuple[Entry, ...]:
        if not root.is_dir():
            self._known, self.listed = {}, True
            return ()
        known, entries = {}, []
        for path, found in _walk(root, ""):
            seen = self._known.get(path)
            try:
                if seen is None or not seen.trusted or seen.stamp != _stamp(found):
                    seen = _hash(root / path, found)
            except FileNotFoundError:  # removed while listed
                continue
            known[path] = seen
            entries.append(Entry(path, seen.stamp[0], seen.sha256, seen.blocks))
        self._known = known
        self.listed = True
        return tuple(sorted(entries, key=lambda e: e.path))

    def recorded(self) -> tuple[Entry, ...] | None:
        """What the last listing found plus what :meth:`note` and :meth:`drop` said since — without
        looking at the disk (a folder only this process writes) — or None before any listing."""
        if not self.listed:
            return None
        found = (Entry(path, seen.stamp[0], seen.sha256, seen.blocks) for path, seen in self._known.items())
        return tuple(sorted(found, key=lambda e: e.path))

    def drop(self, paths: tuple[str, ...]) -> None:
        """These files were removed."""
        for path in paths:
            self._known.pop(path, None)

    def note(self, root: Path, path: str, sha256: str, blocks: tuple[str, ...] = ()) -> None:
        """``root/path`` was just written, by this process alone, with bytes whose SHA-256 is
        ``sha256``: trusted as long as it keeps its stamp (a staging folder nobody else writes)."""
        self._known[path] = _Hashed(_stamp((root / path).lstat()), sha256, True, blocks)


def _walk(root: Path, prefix: str) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file under ``root`` (not following links), with its ``lstat``."""
    try:
        entries = list(os.scandir(root / prefix if prefix else root))
    except FileNotFoundError:
        return
    for entry in entries:
        path = f"{prefix}{entry.name}"
        try:
            found = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(found.st_mode):
            yield from _walk(root, path + "/")
        elif stat.S_ISREG(found.st_mode):
            yield path, found


def _hash(p: Path, before: os.stat_result) -> _Hashed:
    began = time.time_ns()
    sha, blocks = digests(p)
    after = p.lstat()
    stable = _stamp(after) == _stamp(before)
    newest = max(after.st_mtime_ns, after.st_ctime_ns)
    return _Hashed(_stamp(after), sha, stable and newest < began - RACY_NS, blocks)


def to_json(entries: tuple[Entry, ...]) -> list[dict[str, object]]:
    return [_json(e) for e in entries]


def _json(e: Entry) -> dict[str, object]:
    found: dict[str, object] = {"path": e.path, "size": e.size, "sha256": e.sha256}
    if e.blocks:
        found["blocks"] = list(e.blocks)
    return found


def from_json(raw: object) -> tuple[Entry, ...]:
    """A manifest sent by another node; refused (ValueError) if malformed or a path leaves the folder."""
    if not isinstance(raw, list):
        raise ValueError("a manifest is a list of files")
    entries = []
    for item in raw:
        if not isinstance(item, dict):
            raise ValueError("each manifest entry is an object with path, size and sha256")
        path, size, sha = item.get("path"), item.get("size"), item.get("sha256")
        if not isinstance(path, str) or not isinstance(size, int) or not isinstance(sha, str):
            raise ValueError(f"manifest entry {item!r} needs a text path, a whole size and a sha256")
        if not safe_relative(path):
            raise ValueError(f"manifest path {path!r} leaves the workspace's folder")
        blocks = item.get("blocks", [])
        if not isinstance(blocks, list) or not all(isinstance(b, str) for b in blocks):
            raise ValueError(f"manifest entry {path!r}: blocks is a list of digests")
        entries.append(Entry(path, size, sha, tuple(blocks)))
    return tuple(sorted(entries, key=lambda e: e.path))


def safe_relative(path: str) -> bool:
    """A relative path that stays inside its folder (no ``..``, not absolute, not empty)."""
    pure = PurePosixPath(path)
    return bool(path) and not pure.is_absolute() and ".." not in pure.parts and "\\" not in path


def differences(expected: tuple[Entry, ...], found: tuple[Entry, ...]) -> list[str]:
    """What differs between two manifests, one line per file (empty when they are the same)."""
    want, got = {e.path: e for e in expected}, {e.path: e for e in found}
    lines = [f"missing: {p}" for p in sorted(want.keys() - got.keys())]
    lines += [f"unexpected: {p}" for p in sorted(got.keys() - want.keys())]
    lines += [f"differs: {p}" for p in sorted(want.keys() & got.keys()) if want[p] != got[p]]
    return lines
