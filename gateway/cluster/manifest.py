"""What a workspace's folder holds, file by file, to copy it between nodes and prove the copy
(issue 15 item 3): each regular file's path (relative, ``/``-separated), size and SHA-256."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    sha256: str


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def manifest(root: Path) -> tuple[Entry, ...]:
    """Every regular file under ``root`` (sockets and other special files are not data), sorted."""
    found = [
        Entry(p.relative_to(root).as_posix(), p.stat().st_size, digest(p))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    ]
    return tuple(sorted(found, key=lambda e: e.path))


def to_json(entries: tuple[Entry, ...]) -> list[dict[str, object]]:
    return [{"path": e.path, "size": e.size, "sha256": e.sha256} for e in entries]


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
        entries.append(Entry(path, size, sha))
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
