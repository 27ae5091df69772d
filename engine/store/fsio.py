"""Durable file operations: a write returns only once it would survive a crash.

- appends: write, flush, fsync the file; fsync its directory when the file is new;
- whole files: temp file in the same directory, fsync, atomic rename, fsync the directory;
- moves: rename, then fsync both directories;
- every directory created on the way is fsynced into its parent;
- :func:`durable` turns an I/O failure into a refusal that says nothing was saved.

Also the store's one walk of a folder's Markdown files (:func:`md_files`, :func:`md_tree`).

Given a :class:`SyncPlan`, appends and whole-file writes leave their fsyncs (and a whole file's
rename) to the plan instead, for a group commit (:mod:`engine.store.commit`) to do once for
many writes: :func:`flush` does them in the order that keeps every file whole.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import StoreUnavailable, WorkspaceLocked
from engine.store.layout import LOCK_NAME


def markdown_entries(folder: str, *, hidden_folders: bool) -> list[tuple[tuple[str, ...], os.DirEntry[str]]]:
    """``(parts of the path below folder, entry)`` of every ``*.md`` entry below ``folder`` that is
    neither hidden nor a folder, unsorted; folders starting with ``.`` are entered only with
    ``hidden_folders``. As ``os.walk`` does: a linked folder is not entered (nor taken as a file),
    and a folder that cannot be listed (or is gone) is passed over."""
    found: list[tuple[tuple[str, ...], os.DirEntry[str]]] = []

    def walk(path: str, parts: tuple[str, ...]) -> None:
        try:
            with os.scandir(path) as listing:
                entries = list(listing)
        except OSError:
            return
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir():
                    if not entry.is_symlink() and (hidden_folders or not name.startswith(".")):
                        walk(entry.path, (*parts, name))
                elif name.endswith(".md") and not name.startswith("."):
                    found.append(((*parts, name), entry))
            except OSError:
                continue

    walk(folder, ())
    return found


def md_files(base: Path) -> list[Path]:
    """Every Markdown file below ``base`` (none when it does not exist), hidden ones left out,
    sorted by their path's parts. Folders reached through a symbolic link are not entered (a
    linked file is read); a folder that cannot be listed is passed over."""
    return [path for path, _ in md_tree(base)]


def md_tree(base: Path) -> list[tuple[Path, Path]]:
    """:func:`md_files` as ``(path, path relative to base)`` pairs (each path parsed once)."""
    entries = markdown_entries(str(base), hidden_folders=True)
    found = sorted(parts for parts, entry in entries if entry.is_file())
    pairs = []
    for parts in found:
        rel = Path(*parts)
        pairs.append((base / rel, rel))
    return pairs


@contextlib.contextmanager
def durable(what: str) -> Iterator[None]:
    """Turn an I/O failure into a refusal that says nothing was saved."""
    try:
        yield
    except OSError as exc:
        raise StoreUnavailable(
            f"could not {what} durably ({exc.strerror or exc}); nothing was saved. "
            "Check the workspace directory's disk space and permissions, then try again."
        ) from exc


@dataclass
class SyncPlan:
    """What a write left to do before it is durable: fsync the directories it created (into their
    parents), these files' data, then make these renames (a whole file's temporary copy into
    place), then fsync these directories."""

    made: list[Path] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    renames: list[tuple[Path, Path]] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)


def flush(plans: Iterable[SyncPlan]) -> int:
    """Make the writes of ``plans`` durable, each file and directory fsynced once however many
    writes touched it: new directories into their parents, every file's data, then the renames
    (so no name ever points at a file whose bytes are not on disk), then the directories that hold
    the new names. Returns how many fsyncs it made."""
    plans = list(plans)
    made = list(dict.fromkeys(path for plan in plans for path in plan.made))
    for path in made:
        fsync_dir(path)
    files = list(dict.fromkeys(path for plan in plans for path in plan.files))
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for tmp, path in (rename for plan in plans for rename in plan.renames):
        os.replace(tmp, path)
    dirs = list(dict.fromkeys(path for plan in plans for path in plan.dirs))
    for path in dirs:
        fsync_dir(path)
    return len(made) + len(files) + len(dirs)


def discard(plans: Iterable[SyncPlan]) -> None:
    """Remove the temporary files of writes that will not be made durable (a failed flush)."""
    for plan in plans:
        for tmp, _ in plan.renames:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path, plan: SyncPlan | None = None) -> None:
    """Create ``path`` and missing parents, each made durable in its parent (or by ``plan``)."""
    if path.is_dir():
        return
    ensure_dir(path.parent, plan)
    with contextlib.suppress(FileExistsError):
        path.mkdir()
    if plan is None:
        fsync_dir(path.parent)
    else:
        plan.made.append(path.parent)


def append_durable(path: Path, data: bytes, plan: SyncPlan | None = None) -> None:
    """Append ``data``; if the file does not end with a newline (a torn tail), start on a new line.
    With ``plan``, the fsyncs are left to it."""
    new = not path.exists()
    if new:
        ensure_dir(path.parent, plan)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if plan is None:
            os.fsync(fd)
    finally:
        os.close(fd)
    if plan is not None:
        plan.files.append(path)
        if new:
            plan.dirs.append(path.parent)
    elif new:
        fsync_dir(path.parent)


def write_atomic(path: Path, data: bytes, plan: SyncPlan | None = None) -> None:
    """Write ``path`` whole: a temporary file, fsynced, renamed into place, its directory fsynced.
    With ``plan``, only the temporary file is written: the rest is left to it (:func:`flush`)."""
    ensure_dir(path.parent, plan)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if plan is None:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    if plan is not None:
        plan.files.append(tmp)
        plan.renames.append((tmp, path))
        plan.dirs.append(path.parent)
        return
    os.replace(tmp, path)
    fsync_dir(path.parent)


def move_durable(src: Path, dst: Path) -> None:
    if dst.exists():
        raise FileExistsError(
            errno.EEXIST, "the destination already exists; refusing to overwrite it", str(dst)
        )
    ensure_dir(dst.parent)
    os.rename(src, dst)
    fsync_dir(dst.parent)
    fsync_dir(src.parent)


class DirectoryLock:
    """One engine per workspace directory: an exclusive ``flock`` on ``.almanac.lock``."""

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceLocked(
                f"another engine is serving {self.path.parent} (it holds {LOCK_NAME}); "
                "stop it first, or point this engine at another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
