"""``GET /admin/activity``: the retrieval log, newest first — what memory put in front of a model.

The lines are answered as the log holds them (:mod:`engine.ageing.retrieval_log`): when, through
which connection (``connection_id``; ``source`` for a stdio client), the query's SHA-256 (or the
query itself only where the workspace logs queries), scope, mode, the ids kept and their scores,
tokens and latency. Never a memory's words: the log has none, and nothing is looked up to add them.

Parameters: ``limit`` (1–200, default 50), ``offset``, ``connection`` (one connection's id, as the
gateway sent it), ``source`` (a self-reported client name, or a connection's name in lines written
before the log kept ids), ``scope``
(only retrievals limited to that scope: what a connection pinned to it may see). The
files are read backwards from their end, so a page costs what it shows, not the log's size; a line
that is not JSON (a torn last write) is skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.admin.common import Parts, refusing
from engine.ageing.retrieval_log import LOG, ROTATED
from engine.errors import InvalidInput

MAX_LIMIT = 200
_BLOCK = 64 * 1024


def lines_backwards(path: Path, block: int = _BLOCK) -> Iterator[bytes]:
    """The lines of ``path`` from the last to the first (none if it does not exist)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed in finally, across yields
    except FileNotFoundError:
        return
    try:
        position = handle.seek(0, os.SEEK_END)
        tail = b""
        while position > 0:
            step = min(block, position)
            position -= step
            handle.seek(position)
            chunk = handle.read(step) + tail
            parts = chunk.split(b"\n")
            tail = parts[0]
            for line in reversed(parts[1:]):
                if line.strip():
                    yield line
        if tail.strip():
            yield tail
    finally:
        handle.close()


def entries(root: Path) -> Iterator[dict[str, Any]]:
    """Every readable log entry of the workspace at ``root``, newest first (current file, then the
    rotated one)."""
    for name in (LOG, ROTATED):
        for raw in lines_backwards(root / name):
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry


def page(
    found: Iterator[Mapping[str, Any]],
    *,
    offset: int,
    limit: int,
    source: str | None,
    scope: str | None = None,
    connection: str | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """One page of ``found`` (filtered by ``source`` and ``scope``) and whether more follow (pure
    over the iterator)."""
    out: list[dict[str, Any]] = []
    skipped = 0
    for entry in found:
        if source is not None and entry.get("source") != source:
            continue
        if scope is not None and entry.get("scope") != scope:
            continue
        if connection is not None and entry.get("connection_id") != connection:
            continue
        if skipped < offset:
            skipped += 1
            continue
        if len(out) == limit:
            return out, True
        out.append(dict(entry))
    return out, False


def _number(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}, not {raw!r}")
    return int(raw)


def routes(parts: Parts) -> list[BaseRoute]:
    root = parts.workspace.root

    async def activity(request: Request) -> Response:
        params = request.query_params
        limit = _number(params, "limit", 50, 1, MAX_LIMIT)
        offset = _number(params, "offset", 0, 0, 10**9)
        source, scope = params.get("source") or None, params.get("scope") or None
        connection = params.get("connection") or None
        found, more = page(
            entries(root), offset=offset, limit=limit, source=source, scope=scope, connection=connection
        )
        return JSONResponse({"entries": found, "offset": offset, "limit": limit, "more": more})

    return [Route("/admin/activity", refusing(activity), methods=["GET"])]
