"""Export a workspace as a zip of its store, and restore such a zip into an empty workspace.

The zip holds every file of the store exactly as it is on disk (Markdown, the ledger, day logs,
settings — not the derived ``.index/`` and ``.cache/``, not the lock) — except that an archived
note moved into ``archive/`` by hand, without its cold-storage banner, is written as the store
reads it, banner first (``life:archive``) — plus ``almanac-export.json``:
format, version, time, counts, and each file's size and SHA-256. Restoring checks every file
against the manifest before anything is moved into the workspace."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from engine.errors import BadImport
from engine.store import cold, fsio, notefile
from engine.store.model import State
from engine.store.workspace import ARCHIVE, Workspace
from engine.transfer.progress import printer, ticker
from engine.transfer.sources import Entry, open_source

MANIFEST = "almanac-export.json"
FORMAT = "almanac-export"
VERSION = 1
DERIVED = (".index", ".cache")
STAGING_PREFIX = ".transfer-"


def store_files(root: Path) -> list[PurePosixPath]:
    """Every file of the store, sorted: not derived data, not the lock, not symbolic links."""
    found: list[PurePosixPath] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in DERIVED and not d.startswith(STAGING_PREFIX)]
        for name in filenames:
            path = Path(dirpath, name)
            if rel_dir == Path(".") and name == fsio.LOCK_NAME:
                continue
            if path.is_symlink() or not path.is_file():
                continue
            found.append(PurePosixPath((rel_dir / name).as_posix()))
    return sorted(found)


def counts(ws: Workspace) -> dict[str, int]:
    return {
        "notes": len(ws.notes),
        "retired_notes": sum(1 for r in ws.notes.values() if r.state is State.RETIRED),
        "log_entries": len(ws.logs),
        "facts": len(ws.facts.records),
    }


def export(ws: Workspace, target: Path, out: TextIO = sys.stderr) -> dict[str, Any]:
    """Write the workspace's store to the zip ``target`` (which must not exist); return the manifest."""
    say = printer(out, "export")
    if target.exists():
        raise BadImport(f"{target} already exists; choose a new file name (nothing was written)")
    if target.resolve().is_relative_to(ws.root.resolve()):
        raise BadImport(f"{target} is inside the workspace; write the export somewhere else")
    if not target.parent.is_dir():
        raise BadImport(f"the folder {target.parent} does not exist")
    files = store_files(ws.root)
    say(f"{len(files)} files ({_summary(ws)})")
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "workspace": ws.root.name,  # its folder's name: under a gateway, the workspace's id
        "counts": counts(ws),
        "files": [],
    }
    partial = target.with_name(f".{target.name}.partial")
    tick = ticker(say, len(files), "written")
    with ws.lock:  # archived notes whose file lacks the banner: exported as read, banner first
        cold_notes = {
            PurePosixPath(ARCHIVE, r.rel.as_posix()): r.note
            for r in ws.notes.values()
            if r.state is State.ARCHIVED
        }
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for i, rel in enumerate(files, start=1):
                data = (ws.root / rel).read_bytes()
                note = cold_notes.get(rel)
                if note is not None and not _file_has_banner(data, note.id):
                    data = notefile.format_note(note).encode()
                archive.writestr(str(rel), data)
                manifest["files"].append(
                    {"path": str(rel), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                )
                tick(i)
            archive.writestr(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, target)
        fsio.fsync_dir(target.parent)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    say(f"wrote {target} ({target.stat().st_size} bytes)")
    return manifest


def _file_has_banner(data: bytes, note_id: str) -> bool:
    """Whether a note file's body starts with the cold-storage banner (an unreadable file: as if
    it did — it is exported as it is)."""
    try:
        return cold.has_banner(notefile.parse_note(data.decode("utf-8"), note_id).body)
    except ValueError:  # UnicodeDecodeError included
        return True


def read_manifest(entries: list[Entry]) -> dict[str, Any] | None:
    """The export manifest among a source's files, or None when the source is not an Almanac export."""
    found = [e for e in entries if str(e.path) == MANIFEST]
    if not found:
        return None
    try:
        manifest = json.loads(found[0].read())
    except ValueError as exc:
        raise BadImport(f"{MANIFEST} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BadImport(f"{MANIFEST} is not an Almanac export manifest")
    if manifest.get("version") != VERSION:
        raise BadImport(
            f"this export has format version {manifest.get('version')}; this engine reads {VERSION}"
        )
    return manifest


def is_export(source: Path) -> bool:
    """Whether ``source`` (a folder or zip) is an Almanac export (it holds the manifest)."""
    with open_source(source) as (entries, _):
        return read_manifest(entries) is not None


def check_empty(ws: Workspace) -> None:
    """An export is restored only into an empty workspace (:class:`BadImport` otherwise)."""
    if ws.notes or ws.logs or ws.facts.records or store_files(ws.root):
        raise BadImport(
            f"{ws.root} already holds memories; restore an export into a new, empty workspace "
            "(nothing was written)"
        )


def restore(ws: Workspace, source: Path, out: TextIO = sys.stderr) -> dict[str, int]:
    """Put an export's files into an empty workspace, checked against its manifest, all or nothing."""
    say = printer(out, "import")
    check_empty(ws)
    with open_source(source) as (entries, skipped):
        manifest = read_manifest(entries)
        if manifest is None:
            raise BadImport(f"{source} has no {MANIFEST}; it is not an Almanac export")
        if skipped:
            raise BadImport(
                f"{source} has entries that cannot be restored safely: {skipped[0].path} "
                f"({skipped[0].reason}); nothing was written"
            )
        by_path = {str(e.path): e for e in entries if str(e.path) != MANIFEST}
        listed = {f["path"]: f for f in manifest["files"]}
        if set(by_path) != set(listed):
            extra = sorted(set(by_path) ^ set(listed))
            raise BadImport(f"the export's files do not match its manifest ({extra[0]}); nothing was written")
        for name in sorted(listed):
            top = PurePosixPath(name).parts[0]
            if top in DERIVED or top == fsio.LOCK_NAME or top.startswith(STAGING_PREFIX):
                raise BadImport(
                    f"the export holds {name}, which is not part of a store (derived data or the "
                    "engine's own file; an export never carries it); nothing was written"
                )
        staging = ws.root / f"{STAGING_PREFIX}restore"
        shutil.rmtree(staging, ignore_errors=True)
        say(f"{len(listed)} files to restore")
        tick = ticker(say, len(listed), "checked")
        try:
            for i, (name, entry) in enumerate(sorted(by_path.items()), start=1):
                data = entry.read()
                want = listed[name]
                if len(data) != want["bytes"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
                    raise BadImport(f"{name} does not match the manifest (a damaged export); nothing written")
                fsio.write_atomic(staging / name, data)
                tick(i)
            for top in sorted(p.name for p in staging.iterdir()):
                if (ws.root / top).exists():
                    raise BadImport(f"{ws.root / top} appeared during the restore; nothing was written")
            for top in sorted(p.name for p in staging.iterdir()):
                os.replace(staging / top, ws.root / top)
            fsio.fsync_dir(ws.root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    ws.load()
    got = counts(ws)
    say(f"restored {_summary(ws)}")
    if got != manifest["counts"]:
        say(f"warning: the export's manifest counted {manifest['counts']}, the workspace now reads {got}")
    return got


def _summary(ws: Workspace) -> str:
    c = counts(ws)
    return f"{c['notes']} notes, {c['log_entries']} log entries, {c['facts']} facts"
