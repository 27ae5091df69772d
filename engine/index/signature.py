"""What the store looks like from outside, cheaply: the files' sizes and times (pure but for ``stat``).

- :func:`store_signature` — ``relative path → (mtime_ns, size)`` of every Markdown file of the
  store: the periodic scan compares it to notice edits made by hand.
- :func:`clean_mark` — what a clean stop records in the index when its rows match the store: the
  signature, the code that turns files into rows, and the settings that shape them (and the
  contents of the files changed in the last seconds before the stop). A start that finds the same
  mark has nothing to reconcile; any change to a file (its time, size, or — for those — contents),
  to that code or to those settings gives another mark, and the start reconciles as before.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from engine.store import fsio

Signature = dict[str, tuple[int, int]]

STORE_DIRS = ("facts", "notes", "archive", "retired", "logs")


def store_signature(root: Path) -> Signature:
    """``relative path → (mtime_ns, size)`` of every Markdown file of the store (cheap: stat only).

    Runs at every start and every hand-edit scan (each 5 s), so it walks with ``os.scandir``
    (:func:`engine.store.fsio.markdown_entries`) and builds each relative path as text
    (``os.path.relpath`` per file was most of its cost)."""
    out: Signature = {}
    for top in STORE_DIRS:
        for parts, entry in fsio.markdown_entries(os.path.join(root, top), hidden_folders=False):
            try:
                st = entry.stat()
            except FileNotFoundError:  # a dangling link, or gone meanwhile
                continue
            out["/".join((top, *parts))] = (st.st_mtime_ns, st.st_size)
    return out


def code_digest(modules: tuple[ModuleType, ...]) -> str | None:
    """SHA-256 over the source files of ``modules`` (None when one cannot be read: then no mark
    ever matches, and every start reconciles)."""
    digest = hashlib.sha256()
    for module in modules:
        try:
            digest.update(Path(str(module.__file__)).read_bytes())
        except (OSError, TypeError):
            return None
    return digest.hexdigest()


#: Files changed this close to a clean stop may share their timestamp with a later edit (file
#: systems keep times as coarse as 2 s): the mark holds their contents too, as git does with
#: "racily clean" files.
RACY_NS = 2_000_000_000


def clean_mark(
    signature: Signature, code: str | None, settings: str, stopped_ns: int, read: Callable[[str], bytes]
) -> str | None:
    """The mark of an index in step with a store whose files are ``signature``, its rows made by
    ``code`` (:func:`code_digest`) under ``settings``, left at ``stopped_ns`` (epoch ns); ``read``
    gives a file's bytes by its relative path. None when the code is unknown or a file is gone."""
    if code is None:
        return None
    digest = hashlib.sha256(f"{code}\0{settings}\n".encode())
    for rel, (mtime, size) in sorted(signature.items()):
        digest.update(f"{rel}\0{mtime}\0{size}\n".encode("utf-8", "surrogatepass"))
        if mtime >= stopped_ns - RACY_NS:
            try:
                digest.update(hashlib.sha256(read(rel)).digest())
            except OSError:
                return None
    return f"{stopped_ns}:{digest.hexdigest()}"


def mark_holds(
    mark: str, signature: Signature, code: str | None, settings: str, read: Callable[[str], bytes]
) -> bool:
    """Whether ``mark`` (left by a clean stop) is the mark of the store and code as they are now."""
    stopped, _, _ = mark.partition(":")
    if not stopped.isdigit():
        return False
    return mark == clean_mark(signature, code, settings, int(stopped), read)
