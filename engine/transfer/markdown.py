"""Import a folder or zip of Markdown as notes under ``notes/Imported/<label>/<relative path>``.

Each Markdown file is copied byte for byte (its frontmatter and ``[[wikilinks]]`` kept); the
engine reads it as a note like any file dropped into ``notes/``. Skipped, and reported with the
reason: files that are not Markdown, hidden files and folders (``.obsidian/``), symbolic links,
binary or non-UTF-8 files, files over the per-file limit (:mod:`engine.transfer.limits`: the
index's own), unreadable frontmatter, a note id already used, a path that another file already
takes (or that would be a file and a folder at once), and zip entries whose path would leave the
target folder or is too long. Each file is read in chunks, within the per-file limit and the
import's total (past the total, or from a damaged zip, the whole import is refused), and written
to a staging folder at once, so memory holds one file at a time."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from engine.errors import BadImport
from engine.store import fsio, notefile
from engine.store.layout import IMPORTED, STAGING_PREFIX
from engine.store.workspace import Workspace
from engine.transfer.limits import DEFAULT, Budget, FileTooLarge, Limits, mib, stream
from engine.transfer.limits import read as read_member
from engine.transfer.progress import printer, ticker
from engine.transfer.sources import Entry, Skipped, open_source

SUFFIXES = (".md", ".markdown")
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}")


@dataclass(frozen=True)
class Planned:
    source: PurePosixPath
    target: PurePosixPath  # relative to the workspace
    data: bytes


@dataclass(frozen=True)
class Report:
    folder: PurePosixPath
    imported: tuple[PurePosixPath, ...]
    skipped: tuple[Skipped, ...]


def check_label(label: str) -> str:
    """A label names a folder: letters, digits, space, ``_ . -``; at most 64; no ``..``."""
    if not _LABEL.fullmatch(label) or ".." in label or label.endswith((".", " ")):
        raise BadImport(
            f"bad label {label!r}: use 1–64 letters, digits, spaces, '_', '.' or '-', starting with a "
            "letter or digit (e.g. 'Obsidian 2026'); nothing was written"
        )
    return label


def check_target(ws: Workspace, label: str) -> PurePosixPath:
    """The folder ``label`` imports into; :class:`BadImport` if the label is bad or already used."""
    check_label(label)
    folder = IMPORTED / label
    if (ws.root / folder).exists():
        raise BadImport(f"{folder} already exists; choose another label (nothing was written)")
    return folder


def _not_read(entry: Entry, limits: Limits) -> str | None:
    """Why ``entry`` is skipped without being read, or None."""
    if any(part.startswith(".") for part in entry.path.parts):
        return "hidden (its name or a folder's starts with '.')"
    if entry.path.suffix.lower() not in SUFFIXES:
        return "not Markdown (.md or .markdown)"
    if entry.size > limits.file_bytes:
        return _too_large(limits)
    return None


def _too_large(limits: Limits) -> str:
    return f"larger than {mib(limits.file_bytes)}, the most one note may hold"


def check_source(source: Path, limits: Limits = DEFAULT) -> None:
    """What an import of ``source`` can refuse before writing a byte: more than the import's total
    (as the zip declares it: a member is never read past its declared size), and a damaged zip
    (every file that would be read is read once, within the limits; nothing is kept)."""
    with open_source(source, limits) as (entries, _):
        wanted = [e for e in sorted(entries, key=lambda e: str(e.path)) if _not_read(e, limits) is None]
        Budget(limits).take(sum(e.size for e in wanted), "the sizes the zip declares")
        budget = Budget(limits)
        for entry in wanted:
            with contextlib.suppress(FileTooLarge):  # skipped, not refused: the plan says why
                stream(str(entry.path), entry.open, limits.file_bytes, budget)


def plan(
    entries: list[Entry],
    label: str,
    used_ids: set[str],
    limits: Limits = DEFAULT,
    stopping: threading.Event | None = None,
) -> Iterator[Planned | Skipped]:
    """Each file in turn: the note it becomes, read whole (within the limits), or why it is
    skipped. :class:`BadImport` past the import's total or for a damaged zip;
    :class:`~engine.errors.ImportStopped` once ``stopping`` is set."""
    ids = set(used_ids)
    targets: set[PurePosixPath] = set()
    folders: set[PurePosixPath] = set()
    budget = Budget(limits, stopping)
    too_large = _too_large(limits)
    for entry in sorted(entries, key=lambda e: str(e.path)):
        name = str(entry.path)
        why = _not_read(entry, limits)
        if why is not None:
            yield Skipped(name, why)
            continue
        target = IMPORTED / label / entry.path.with_suffix(".md")
        if target in targets or target in folders:
            yield Skipped(name, f"another file already becomes {target}")
            continue
        if any(parent in targets for parent in target.parents):
            yield Skipped(name, "a file of the import already has the name of one of its folders")
            continue
        try:
            data = read_member(name, entry.open, limits.file_bytes, budget)
        except FileTooLarge:
            yield Skipped(name, too_large)  # its header understated its size
            continue
        try:
            if b"\x00" in data:
                raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            yield Skipped(name, "binary, or not UTF-8 text")
            continue
        default_id = "nte_h" + str(target)  # only checked for being present, not kept
        try:
            note = notefile.parse_note(text, default_id)
        except ValueError as exc:
            yield Skipped(name, f"unreadable frontmatter: {exc}")
            continue
        if note.id != default_id:
            if note.id in ids:
                yield Skipped(name, f"its id {note.id} is already used by another note")
                continue
            ids.add(note.id)
        targets.add(target)
        folders.update(target.parents)
        yield Planned(entry.path, target, data)


def import_markdown(
    ws: Workspace,
    source: Path,
    label: str,
    out: TextIO = sys.stderr,
    limits: Limits = DEFAULT,
    stopping: threading.Event | None = None,
) -> Report:
    """Import ``source`` into ``ws`` under ``notes/Imported/<label>/``, all at once at the end
    (``stopping`` set meanwhile abandons it whole: :class:`~engine.errors.ImportStopped`)."""
    say = printer(out, "import")
    folder = check_target(ws, label)
    staging = ws.root / f"{STAGING_PREFIX}import"
    shutil.rmtree(staging, ignore_errors=True)
    imported: list[PurePosixPath] = []
    try:
        with open_source(source, limits) as (entries, unsafe):
            say(f"{len(entries)} files found in {source}")
            skipped = list(unsafe)
            tick = ticker(say, len(entries), "read")
            for i, item in enumerate(plan(entries, label, set(ws.notes), limits, stopping), start=1):
                if isinstance(item, Skipped):
                    skipped.append(item)
                else:
                    fsio.write_atomic(staging / item.target.relative_to(folder), item.data)
                    imported.append(item.target)
                tick(i)
        say(f"copied {len(imported)} of {len(imported)} files")
        Budget(limits, stopping).take(0, "nothing more")  # a stop that came meanwhile: nothing moved
        if imported:
            fsio.ensure_dir((ws.root / folder).parent)
            os.replace(staging, ws.root / folder)
            fsio.fsync_dir((ws.root / folder).parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    ws.load()
    say(f"imported {len(imported)} notes into {folder}/")
    for skip in skipped:
        say(f"skipped {skip.path}: {skip.reason}")
    if skipped:
        say(f"skipped {len(skipped)} files")
    return Report(folder, tuple(imported), tuple(skipped))
