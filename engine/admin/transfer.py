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
"""

from __future__ import annotations

import io
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.admin import Parts, refusing
from engine.errors import BadImport
from engine.transfer import archive, markdown

#: The most a body may hold (the gateway sets its own, smaller, limit for owners).
MAX_UPLOAD_BYTES = 1024 * 1024 * 1024
MEDIA_TYPE = "application/zip"


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


def run_import(parts: Parts, source: Path, label: str | None) -> Outcome:
    """Import the zip ``source`` into the running workspace, then bring the index up to date."""
    if not zipfile.is_zipfile(source):
        raise BadImport("the upload is not a zip file; send a .zip of Markdown files or an Almanac export")
    ws, out = parts.workspace, io.StringIO()
    with ws.lock:
        if archive.is_export(source):
            archive.restore(ws, source, out=out)
            outcome = Outcome("restore", None, [], [], archive.counts(ws), [])
        elif not label:
            raise BadImport("this zip is not an Almanac export; importing Markdown needs a label")
        else:
            report = markdown.import_markdown(ws, source, label, out=out)
            outcome = Outcome(
                "markdown",
                str(report.folder),
                [str(p) for p in report.imported],
                [{"path": s.path, "reason": s.reason} for s in report.skipped],
                archive.counts(ws),
                [],
            )
        if parts.indexer is not None:
            parts.indexer.scan_once()  # reload the store and index what arrived, before answering
    lines = out.getvalue().replace(str(source), "the upload").splitlines()  # never a server path
    return replace(outcome, progress=lines)


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
        folder = Path(tempfile.mkdtemp(prefix="almanac-import-"))
        try:
            source = folder / "upload.zip"
            await _receive(request, source)
            outcome = await anyio.to_thread.run_sync(run_import, parts, source, label)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return JSONResponse(outcome.to_json())

    return [
        Route("/admin/export", export, methods=["GET"]),
        Route("/admin/import", import_, methods=["POST"]),
    ]
