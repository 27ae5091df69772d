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
import re
import shutil
import sys
import threading
import zipfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from engine import settings
from engine.errors import BadImport
from engine.store import cold, fsio, notefile
from engine.store.layout import ARCHIVE, DERIVED, LOCK_NAME, STAGING_PREFIX
from engine.store.model import State
from engine.store.workspace import Workspace
from engine.transfer.limits import DEFAULT, Budget, Limits, collisions, mib, read, stream
from engine.transfer.progress import printer, ticker
from engine.transfer.sources import Entry, Skipped, open_source

MANIFEST = "almanac-export.json"
FORMAT = "almanac-export"
VERSION = 1


def store_files(root: Path) -> list[PurePosixPath]:
    """Every file of the store, sorted: not derived data, not the lock, not symbolic links."""
    found: list[PurePosixPath] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in DERIVED and not d.startswith(STAGING_PREFIX)]
        for name in filenames:
            path = Path(dirpath, name)
            if rel_dir == Path(".") and name == LOCK_NAME:
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


#: The most the manifest may hold (about 150 bytes a file: room for every file an import takes).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Files an engine appends to over time: only the import's total bounds them (see limits).
APPENDED = ("facts", "logs", "retired/logs")


def read_manifest(entries: list[Entry], limits: Limits = DEFAULT) -> dict[str, Any] | None:
    """The export manifest among a source's files, checked (:func:`check_manifest`), or None when
    the source is not an Almanac export."""
    found = [e for e in entries if str(e.path) == MANIFEST]
    if not found:
        return None
    data = read(MANIFEST, found[0].open, MAX_MANIFEST_BYTES, Budget(limits))
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise BadImport(f"{MANIFEST} is not valid JSON ({exc}); nothing was written") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BadImport(f"{MANIFEST} is not an Almanac export manifest; nothing was written")
    if manifest.get("version") != VERSION:
        raise BadImport(
            f"this export has format version {manifest.get('version')}; this engine reads {VERSION} "
            "(nothing was written)"
        )
    check_manifest(manifest)
    return manifest


def check_manifest(manifest: dict[str, Any]) -> None:
    """:class:`BadImport`, saying what is wrong, unless ``files`` is a list of ``{path, bytes,
    sha256}`` (each path once) and ``counts`` maps names to whole numbers."""
    files, tally = manifest.get("files"), manifest.get("counts")
    bad, nothing = f"{MANIFEST} is damaged: ", "; nothing was written"
    if not isinstance(files, list):
        raise BadImport(
            bad + f"'files' must be a list of {{path, bytes, sha256}}, not {type(files).__name__}" + nothing
        )
    if not isinstance(tally, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in tally.values()
    ):
        raise BadImport(bad + "'counts' must map names to whole numbers" + nothing)
    seen: set[str] = set()
    for n, item in enumerate(files):
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("bytes"), int)
            and not isinstance(item.get("bytes"), bool)
            and item["bytes"] >= 0
            and isinstance(item.get("sha256"), str)
            and _SHA256.fullmatch(item["sha256"]) is not None
        )
        if not ok:
            raise BadImport(bad + f"file {n + 1} is not {{path, bytes, sha256 (64 hex digits)}}" + nothing)
        if item["path"] in seen:
            raise BadImport(bad + f"{item['path']} is listed twice" + nothing)
        seen.add(item["path"])


def file_cap(name: str, limits: Limits) -> int:
    """The most one restored file may hold: the per-file limit, except for the files an engine
    appends to (only the total bounds those)."""
    appended = any(name.startswith(top + "/") for top in APPENDED) or "/" not in name
    return limits.total_bytes if appended else limits.file_bytes


def is_export(source: Path, limits: Limits = DEFAULT) -> bool:
    """Whether ``source`` (a folder or zip) is an Almanac export (it holds the manifest)."""
    with open_source(source, limits) as (entries, _):
        return read_manifest(entries, limits) is not None


def check_empty(ws: Workspace) -> None:
    """An export is restored only into an empty workspace (:class:`BadImport` otherwise)."""
    if ws.notes or ws.logs or ws.facts.records or store_files(ws.root):
        raise BadImport(
            f"{ws.root} already holds memories; restore an export into a new, empty workspace "
            "(nothing was written)"
        )


def plan_restore(entries: list[Entry], manifest: dict[str, Any], limits: Limits) -> dict[str, Entry]:
    """The entries to restore by path, once every check that needs no reading has passed: they
    match the manifest one for one, none is derived data or collides with another (a file and a
    folder of one name), and the sizes the manifest and the zip declare fit the limits."""
    by_path: dict[str, Entry] = {}
    for e in entries:
        if str(e.path) == MANIFEST:
            continue
        if str(e.path) in by_path:
            raise BadImport(f"the export holds {e.path} twice; nothing was written")
        by_path[str(e.path)] = e
    listed = {f["path"]: f for f in manifest["files"]}
    if set(by_path) != set(listed):
        extra = sorted(set(by_path) ^ set(listed))
        raise BadImport(f"the export's files do not match its manifest ({extra[0]}); nothing was written")
    for name in sorted(listed):
        top = PurePosixPath(name).parts[0]
        if top in DERIVED or top == LOCK_NAME or top.startswith(STAGING_PREFIX):
            raise BadImport(
                f"the export holds {name}, which is not part of a store (derived data or the "
                "engine's own file; an export never carries it); nothing was written"
            )
    clash = collisions(sorted(listed))
    if clash is not None:
        raise BadImport(
            f"the export holds both {clash[0]} and {clash[1]}: one path cannot be a file and a folder; "
            "nothing was written"
        )
    total = 0
    for name, want in sorted(listed.items()):
        cap = file_cap(name, limits)
        if want["bytes"] > cap:
            raise BadImport(
                f"{name} is {want['bytes']:,} bytes; the most one file may hold is {mib(cap)} "
                "(the index's limit); nothing was written"
            )
        if by_path[name].size != want["bytes"]:
            raise BadImport(
                f"{name}: the zip and the manifest disagree on its size (a damaged export); "
                "nothing was written"
            )
        total += want["bytes"]
    Budget(limits).take(total, "the sizes the manifest declares")
    return by_path


def check_restore(ws: Workspace, source: Path, limits: Limits = DEFAULT) -> None:
    """Everything a restore can refuse before writing a byte: a workspace that holds memories, a
    damaged or mismatched manifest, a member that cannot be restored safely, sizes past the limits,
    and a damaged zip (every member is read once, within the limits, its bytes checked against the
    manifest; nothing is kept)."""
    check_empty(ws)
    with open_source(source, limits) as (entries, skipped):
        manifest, by_path = _plan(source, entries, skipped, limits)
        budget = Budget(limits)
        for name, want in sorted((f["path"], f) for f in manifest["files"]):
            size, digest = stream(name, by_path[name].open, want["bytes"], budget, over=_over_manifest)
            if size != want["bytes"] or digest != want["sha256"]:
                raise BadImport(f"{name} does not match the manifest (a damaged export); nothing was written")


def _plan(
    source: Path, entries: list[Entry], skipped: list[Skipped], limits: Limits
) -> tuple[dict[str, Any], dict[str, Entry]]:
    manifest = read_manifest(entries, limits)
    if manifest is None:
        raise BadImport(f"{source} has no {MANIFEST}; it is not an Almanac export")
    if skipped:
        raise BadImport(
            f"{source} has entries that cannot be restored safely: {skipped[0].path} "
            f"({skipped[0].reason}); nothing was written"
        )
    return manifest, plan_restore(entries, manifest, limits)


def _over_manifest(cap: int) -> str:
    return f"it is larger than its manifest says ({cap:,} bytes): a damaged export"


def restore(
    ws: Workspace,
    source: Path,
    out: TextIO = sys.stderr,
    limits: Limits = DEFAULT,
    stopping: threading.Event | None = None,
) -> dict[str, int]:
    """Put an export's files into an empty workspace, checked against its manifest, all or nothing.

    Everything that can be refused from the manifest and the zip's directory is refused before a
    byte is written; then each file is streamed into a staging folder, counted and hashed as it
    arrives (refused the moment it passes its manifest size or a limit), and the staging folder is
    moved into place only when every file has matched. ``stopping`` set (the engine is stopping)
    abandons the restore at its next chunk, before anything is moved (:class:`ImportStopped`)."""
    say = printer(out, "import")
    check_empty(ws)
    with open_source(source, limits) as (entries, skipped):
        manifest, by_path = _plan(source, entries, skipped, limits)
        listed = {f["path"]: f for f in manifest["files"]}
        staging = ws.root / f"{STAGING_PREFIX}restore"
        shutil.rmtree(staging, ignore_errors=True)
        say(f"{len(listed)} files to restore")
        tick = ticker(say, len(listed), "checked")
        budget = Budget(limits, stopping)
        try:
            for i, (name, entry) in enumerate(sorted(by_path.items()), start=1):
                want = listed[name]
                digest = _stage(staging / name, name, entry, want["bytes"], budget)
                if digest != want["sha256"]:
                    raise BadImport(
                        f"{name} does not match the manifest (a damaged export); nothing was written"
                    )
                tick(i)
            budget.take(0, "nothing more")  # a stop that came meanwhile: nothing is moved
            for warning in settings.scrub_restored(staging / settings.WORKSPACE_FILE):
                say(f"warning: {warning}")
            tops = sorted(p.name for p in staging.iterdir()) if staging.exists() else []
            for top in tops:
                if (ws.root / top).exists():
                    raise BadImport(f"{ws.root / top} appeared during the restore; nothing was written")
            for top in tops:
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


def _stage(target: Path, name: str, entry: Entry, size: int, budget: Budget) -> str:
    """Stream ``entry`` into ``target`` (durably), refused past ``size`` (what its manifest says);
    its SHA-256, or BadImport when it is shorter than that."""
    fsio.ensure_dir(target.parent)
    with open(target, "wb") as handle:
        got, digest = stream(
            name,
            entry.open,
            size,
            budget,
            handle.write,
            over=lambda cap: (
                f"it is larger than its manifest says ({cap:,} bytes): a damaged or forged export"
            ),
        )
        handle.flush()
        os.fsync(handle.fileno())
    if got != size:
        raise BadImport(
            f"{name} is {got:,} bytes, not the {size:,} its manifest says (a damaged export); "
            "nothing was written"
        )
    return digest


def _summary(ws: Workspace) -> str:
    c = counts(ws)
    return f"{c['notes']} notes, {c['log_entries']} log entries, {c['facts']} facts"
