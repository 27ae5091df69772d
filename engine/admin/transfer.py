"""``/admin/export`` and ``/admin/import``: a running engine's memories out and in as files
(``life:export``, ``life:import``), for the owner's Workspace page and the REST API.

The offline ``--export`` / ``--import`` modes need the workspace's lock, so they refuse while this
engine serves it; these routes do the same work inside the running engine instead, holding the
workspace lock (writes wait a moment) and then catching the index up, so what was imported can be
recalled at once.

- ``GET /admin/export``: the store as it is on disk plus ``almanac-export.json`` (sizes, SHA-256),
  as a zip (:func:`engine.transfer.archive.export`).
- ``POST /admin/import?label=L``: the body is a zip. An Almanac export is restored into this
  workspace if it is empty (byte for byte, checked against its manifest, all or nothing);
  anything else is Markdown copied under ``notes/Imported/<label>/`` with the same checks as the
  command line (path escapes, symbolic links, binary, oversized, non-Markdown files skipped with
  the reason). The reply says what was imported and what was skipped, and why.

  With ``Accept: application/x-ndjson`` the reply streams instead: one JSON object a line,
  ``{"progress": "import: copied 120 of 900 files"}`` as the work goes, then ``{"result": {...}}``
  (the JSON reply above) or ``{"error": {"code", "message"}}``. What can be refused without
  touching the store (not a zip, a bad or used label, a restore into a workspace that holds
  memories) is refused before the stream starts, as a plain JSON refusal.

The import runs on its own thread: if the caller goes away mid-way it still finishes (or fails
as a whole: files are staged and moved into place at the end, so no note is ever half-written).
If the engine itself begins to stop meanwhile (its gateway went away: ``--exit-with-parent``, or
asked it to), the import is abandoned whole at its next chunk (``import_stopped``): the engine
releases the workspace at once instead of finishing work nobody will be told of, and the retry
imports into a workspace the abandoned import never touched.
"""

from __future__ import annotations

import io
import json
import logging
import queue
import shutil
import tempfile
import threading
import zipfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from engine.admin.common import Parts, refusing
from engine.errors import BadImport, EngineError, without_paths
from engine.transfer import archive, markdown

log = logging.getLogger(__name__)

#: The most a body may hold (the gateway sets its own, smaller, limit for owners).
MAX_UPLOAD_BYTES = 1024 * 1024 * 1024
MEDIA_TYPE = "application/zip"
STREAM_TYPE = "application/x-ndjson"


@dataclass(frozen=True)
class Outcome:
    kind: str  # "markdown" or "restore"
    folder: str | None
    imported: list[str]
    skipped: list[dict[str, str]]
    counts: dict[str, int]
    progress: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "folder": self.folder,
            "imported": self.imported,
            "skipped": self.skipped,
            "counts": self.counts,
            "progress": self.progress,
        }


def run_export(parts: Parts, target: Path) -> dict[str, Any]:
    """Write the export zip to ``target`` with the workspace lock held (a consistent snapshot)."""
    with parts.workspace.lock:
        return archive.export(parts.workspace, target, out=io.StringIO())


class _Lines(io.StringIO):
    """A text stream that hands each complete line to ``on_line`` as it is written."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        super().__init__()
        self._on_line = on_line
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._on_line(line)
        return len(text)


def check_upload(parts: Parts, source: Path, label: str | None) -> None:
    """Refuse, before anything is written, everything that can be refused: not a zip, a bad or
    used label, a restore into a workspace that holds memories, a damaged or mismatched manifest,
    sizes past the limits, and a damaged zip (each member that would be read is read once, within
    the limits, and nothing kept) — so a bad upload is a ``bad_import`` before a stream starts."""
    if not zipfile.is_zipfile(source):
        raise BadImport("the upload is not a zip file; send a .zip of Markdown files or an Almanac export")
    ws, limits = parts.workspace, parts.import_limits
    if archive.is_export(source, limits):
        with ws.lock:
            archive.check_restore(ws, source, limits)
        return
    if not label:
        raise BadImport("this zip is not an Almanac export; importing Markdown needs a label")
    with ws.lock:
        markdown.check_target(ws, label)
    markdown.check_source(source, limits)


def run_import(
    parts: Parts, source: Path, label: str | None, report: Callable[[str], None] | None = None
) -> Outcome:
    """Import the zip ``source`` (already through :func:`check_upload`) into the running workspace,
    then bring the index up to date. Each progress line goes to ``report`` as it happens (and all
    of them into the outcome). The import itself still refuses what may have changed since the
    check (a workspace that gained memories, a label now taken), before writing anything."""
    lines: list[str] = []

    def say(line: str) -> None:
        line = line.replace(str(source), "the upload")  # never a server path
        lines.append(line)
        if report is not None:
            report(line)

    ws, out = parts.workspace, _Lines(say)
    with ws.lock:
        if archive.is_export(source, parts.import_limits):
            archive.restore(ws, source, out=out, limits=parts.import_limits, stopping=parts.stopping)
            outcome = Outcome("restore", None, [], [], archive.counts(ws), [])
        else:
            assert label is not None  # check_upload refused an unlabelled Markdown zip
            done = markdown.import_markdown(
                ws, source, label, out=out, limits=parts.import_limits, stopping=parts.stopping
            )
            outcome = Outcome(
                "markdown",
                str(done.folder),
                [str(p) for p in done.imported],
                [{"path": s.path, "reason": s.reason} for s in done.skipped],
                archive.counts(ws),
                [],
            )
        if parts.indexer is not None:
            say("import: indexing what arrived")
            parts.indexer.scan_once()  # reload the store and index what arrived, before answering
            say(indexed_line(parts.indexer.backlog()))
    return replace(outcome, progress=lines)


def indexed_line(waiting: int) -> str:
    """The import's last progress line: what arrived is in the keyword index once the store is
    reconciled; its embeddings are made in the background, ``waiting`` of them still to come."""
    if not waiting:
        return "import: indexed; searchable now"
    return (
        f"import: indexed; searchable by its words now, and by meaning once the {waiting} chunks "
        "and facts still waiting are embedded in the background"
    )


Events = queue.SimpleQueue[dict[str, Any] | None]


def _run_in_background(parts: Parts, folder: Path, label: str | None) -> Events:
    """Start the import on its own thread; its events arrive on the queue, then ``None``. The
    thread owns ``folder`` (the upload) and removes it when done, whoever is still listening."""
    events: Events = queue.SimpleQueue()

    def report(line: str) -> None:
        events.put({"progress": line})

    def work() -> None:
        try:
            outcome = run_import(parts, folder / "upload.zip", label, report)
            events.put({"result": outcome.to_json()})
        except EngineError as exc:
            events.put({"error": {"code": exc.code, "message": without_paths(exc.message)}})
        except Exception:
            log.exception("an import into %s failed", parts.workspace.root)
            failed = {"code": "engine_error", "message": "the import failed; nothing was imported"}
            events.put({"error": failed})
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            events.put(None)

    threading.Thread(target=work, name="almanac-import", daemon=False).start()
    return events


async def _receive(request: Request, target: Path) -> None:
    size = 0
    with open(target, "wb") as handle:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_UPLOAD_BYTES:
                raise BadImport(
                    f"the upload is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB; nothing was written"
                )
            handle.write(chunk)


def routes(parts: Parts) -> list[BaseRoute]:
    async def export(request: Request) -> Response:
        folder = Path(tempfile.mkdtemp(prefix="almanac-export-"))
        target = folder / "export.zip"
        try:
            await anyio.to_thread.run_sync(run_export, parts, target)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return FileResponse(
            target,
            media_type=MEDIA_TYPE,
            background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
        )

    @refusing
    async def import_(request: Request) -> Response:
        label = request.query_params.get("label") or None
        if label is not None:
            markdown.check_label(label)
        streaming = STREAM_TYPE in request.headers.get("accept", "")
        folder = Path(tempfile.mkdtemp(prefix="almanac-import-"))
        handed_over = False
        try:
            source = folder / "upload.zip"
            await _receive(request, source)
            await anyio.to_thread.run_sync(check_upload, parts, source, label)
            if not streaming:
                outcome = await anyio.to_thread.run_sync(run_import, parts, source, label)
                return JSONResponse(outcome.to_json())
            events = _run_in_background(parts, folder, label)
            handed_over = True
        finally:
            if not handed_over:
                shutil.rmtree(folder, ignore_errors=True)

        async def lines() -> AsyncIterator[bytes]:
            while (event := await anyio.to_thread.run_sync(events.get, abandon_on_cancel=True)) is not None:
                yield (json.dumps(event) + "\n").encode()

        return StreamingResponse(lines(), media_type=STREAM_TYPE, headers={"Cache-Control": "no-store"})

    return [
        Route("/admin/export", export, methods=["GET"]),
        Route("/admin/import", import_, methods=["POST"]),
    ]
