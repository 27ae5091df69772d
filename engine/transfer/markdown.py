"""Import a folder or zip of Markdown as notes under ``notes/Imported/<label>/<relative path>``.

Each Markdown file is copied byte for byte (its frontmatter and ``[[wikilinks]]`` kept); the
engine reads it as a note like any file dropped into ``notes/``. Skipped, and reported with the
reason: files that are not Markdown, hidden files and folders (``.obsidian/``), symbolic links,
binary or non-UTF-8 files, files over :data:`MAX_FILE_BYTES`, unreadable frontmatter, a note id
already used, and zip entries whose path would leave the target folder."""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from engine.errors import BadImport
from engine.store import fsio, notefile
from engine.store.workspace import Workspace
from engine.transfer.archive import STAGING_PREFIX
from engine.transfer.progress import printer, ticker
from engine.transfer.sources import Entry, Skipped, open_source

IMPORTED = PurePosixPath("notes", "Imported")
MAX_FILE_BYTES = 1024 * 1024
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


def plan(entries: list[Entry], label: str, used_ids: set[str]) -> tuple[list[Planned], list[Skipped]]:
    """Which files become which notes, and which are skipped and why (pure, apart from reading)."""
    planned: list[Planned] = []
    skipped: list[Skipped] = []
    ids = set(used_ids)
    for entry in sorted(entries, key=lambda e: str(e.path)):
        name = str(entry.path)
        if any(part.startswith(".") for part in entry.path.parts):
            skipped.append(Skipped(name, "hidden (its name or a folder's starts with '.')"))
            continue
        if entry.path.suffix.lower() not in SUFFIXES:
            skipped.append(Skipped(name, "not Markdown (.md or .markdown)"))
            continue
        if entry.size > MAX_FILE_BYTES:
            skipped.append(Skipped(name, f"larger than {MAX_FILE_BYTES // 1024} KiB"))
            continue
        data = entry.read()
        try:
            if b"\x00" in data:
                raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(Skipped(name, "binary, or not UTF-8 text"))
            continue
        target = IMPORTED / label / entry.path.with_suffix(".md")
        default_id = "nte_h" + str(target)  # only checked for being present, not kept
        try:
            note = notefile.parse_note(text, default_id)
        except ValueError as exc:
            skipped.append(Skipped(name, f"unreadable frontmatter: {exc}"))
            continue
        if note.id != default_id:
            if note.id in ids:
                skipped.append(Skipped(name, f"its id {note.id} is already used by another note"))
                continue
            ids.add(note.id)
        if any(p.target == target for p in planned):
            skipped.append(Skipped(name, f"another file already becomes {target}"))
            continue
        planned.append(Planned(entry.path, target, data))
    return planned, skipped


def import_markdown(ws: Workspace, source: Path, label: str, out: TextIO = sys.stderr) -> Report:
    """Import ``source`` into ``ws`` under ``notes/Imported/<label>/``, all at once at the end."""
    say = printer(out, "import")
    folder = check_target(ws, label)
    with open_source(source) as (entries, unsafe):
        say(f"{len(entries)} files found in {source}")
        planned, skipped = plan(entries, label, set(ws.notes))
    skipped = unsafe + skipped
    staging = ws.root / f"{STAGING_PREFIX}import"
    shutil.rmtree(staging, ignore_errors=True)
    tick = ticker(say, len(planned), "copied")
    try:
        for i, item in enumerate(planned, start=1):
            fsio.write_atomic(staging / item.target.relative_to(folder), item.data)
            tick(i)
        if planned:
            fsio.ensure_dir((ws.root / folder).parent)
            os.replace(staging, ws.root / folder)
            fsio.fsync_dir((ws.root / folder).parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    ws.load()
    say(f"imported {len(planned)} notes into {folder}/")
    for skip in skipped:
        say(f"skipped {skip.path}: {skip.reason}")
    if skipped:
        say(f"skipped {len(skipped)} files")
    return Report(folder, tuple(p.target for p in planned), tuple(skipped))
