"""A node's side of restoring a lost workspace from a backup (``run:scale-out``; driven by ``almanac
workspace restore``, :mod:`gateway.cluster.restore.driver`). Like the move endpoints
(:mod:`gateway.cluster.move.endpoints`, whose folder, staging folder and per-workspace lock these
share), every endpoint answers only the cluster's own calls, signed with ``cluster_secret`` for this
node and this workspace (401 otherwise), under ``/internal/v1/workspaces/{workspace_id}/restore/``,
and only while the control plane says a restore of that workspace to this node is under way (the
workspace is placed on a node declared lost and marked as moving here; 403 otherwise):

``POST …/restore/begin``      an empty staging folder (refused if this node already has a folder
                              for the workspace);
``PUT  …/restore/files/P``    one file of the backup, streamed: its SHA-256 declared and signed,
                              written in bounded pieces and hashed as it arrives, kept in the
                              staging folder (fsynced) only when it matches;
``POST …/restore/settle``     the backup's manifest (path, size, SHA-256 of every file): the staging
                              folder must hold exactly that, file by file, or nothing is settled;
                              then it is moved into place in one rename, and the manifest of what
                              is now on disk is the answer.

After the command flips the placement here, the move endpoint ``POST …/open`` starts the engine on
the restored copy, as after a move.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import BinaryIO

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway import logs
from gateway.asgi import off_loop
from gateway.cluster import manifest, signing
from gateway.cluster.backups import CHUNK
from gateway.cluster.move.endpoints import PREFIX, MoveEndpoints, settle
from gateway.errors import AlreadyExists, BadRequest, Forbidden


class RestoreEndpoints:
    def __init__(self, moves: MoveEndpoints) -> None:
        self.moves = moves
        self._log = logs.get()

    def routes(self) -> list[BaseRoute]:
        return [
            Route(PREFIX + "/restore/begin", self.begin, methods=["POST"]),
            Route(PREFIX + "/restore/files/{path:path}", self.file, methods=["PUT"]),
            Route(PREFIX + "/restore/settle", self.settle, methods=["POST"]),
        ]

    async def _restoring_here(self, workspace_id: str) -> None:
        """Raise :class:`Forbidden` unless a restore of the workspace to this node is under way."""
        here = self.moves.link.here

        def read() -> str | None:
            placement = self.moves.journal.nodes.placement(workspace_id)
            if placement is None or placement.moving_to != here:
                return "no restore of this workspace to this node is under way"
            lost = {n.name for n in self.moves.journal.nodes.all() if n.lost}
            if placement.node not in lost:
                return f"this workspace is on node {placement.node!r}, which is not declared lost"
            return None

        problem = await off_loop(read)
        if problem is not None:
            raise Forbidden(problem + "; nothing was written")

    async def begin(self, request: Request) -> Response:
        workspace_id, _ = await self.moves.verified(request)
        async with self.moves.lock(workspace_id):
            await self._restoring_here(workspace_id)
            folder, staging = self.moves.folder(workspace_id), self.moves.staging(workspace_id)
            if folder.exists() and any(folder.iterdir()):
                raise AlreadyExists(
                    f"node {self.moves.link.here!r} already has a folder for workspace {workspace_id}"
                )
            receiving = self.moves.receiving(workspace_id)
            await anyio.to_thread.run_sync(lambda: _fresh(staging, receiving))
        return JSONResponse({"staging": workspace_id, "node": self.moves.link.here})

    async def file(self, request: Request) -> Response:
        workspace_id, _ = await self.moves.verified(request, streamed=True)
        declared = request.headers[signing.CONTENT_DIGEST_HEADER.decode()]
        path = str(request.path_params["path"])
        if not manifest.safe_relative(path):
            raise BadRequest(f"{path!r} leaves the workspace's folder")
        async with self.moves.lock(workspace_id):  # never written into a copy being discarded
            await self._restoring_here(workspace_id)
            staging = self.moves.staging(workspace_id)
            if not staging.is_dir():
                raise BadRequest("begin the restore first (POST …/restore/begin)")
            size = await _receive(request, staging, self.moves.receiving(workspace_id), path, declared)
        return JSONResponse({"stored": path, "size": size})

    async def settle(self, request: Request) -> Response:
        workspace_id, body = await self.moves.verified(request)
        try:
            wanted = manifest.from_json(json.loads(body))
        except ValueError as exc:
            raise BadRequest(f"a restore is settled with the backup's manifest: {exc}") from None
        async with self.moves.lock(workspace_id):
            await self._restoring_here(workspace_id)
            folder, staging = self.moves.folder(workspace_id), self.moves.staging(workspace_id)
            if not staging.is_dir():
                raise BadRequest("begin the restore first (POST …/restore/begin)")
            staged = await anyio.to_thread.run_sync(manifest.manifest, staging)
            problems = manifest.differences(wanted, staged)
            if problems:
                raise BadRequest("the restored copy differs from the backup: " + "; ".join(problems[:10]))
            await anyio.to_thread.run_sync(lambda: settle(staging, folder))
            found = await anyio.to_thread.run_sync(manifest.manifest, folder)
        logs.event(self._log, logging.INFO, "restore.settled", workspace=workspace_id, files=len(found))
        return JSONResponse({"manifest": manifest.to_json(found)})


def _fresh(staging: Path, receiving: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    receiving.unlink(missing_ok=True)  # a file half-received when an earlier attempt was killed
    staging.mkdir(parents=True)


async def _receive(request: Request, staging: Path, partial: Path, path: str, declared: str) -> int:
    """Stream the request's body into ``partial``, written in pieces of at most
    :data:`~gateway.cluster.backups.CHUNK` bytes and hashed as it arrives, then move it to
    ``staging/path``; refused (nothing kept) unless its SHA-256 is the one declared (and signed)."""
    out = await anyio.to_thread.run_sync(partial.open, "wb")
    digest, size, pending = hashlib.sha256(), 0, bytearray()
    try:
        async for chunk in request.stream():
            digest.update(chunk)
            size += len(chunk)
            pending += chunk
            if len(pending) >= CHUNK:
                await anyio.to_thread.run_sync(out.write, bytes(pending))
                pending.clear()
        await anyio.to_thread.run_sync(lambda: _close(out, bytes(pending)))
        if digest.hexdigest() != declared:
            raise BadRequest(
                f"{path!r} arrived damaged ({size} bytes, sha256 {digest.hexdigest()}); not kept"
            )
        target = staging / path
        await anyio.to_thread.run_sync(lambda: _place(partial, target))
    finally:
        if not out.closed:
            out.close()
        await anyio.to_thread.run_sync(lambda: partial.unlink(missing_ok=True))
    return size


def _close(out: BinaryIO, rest: bytes) -> None:
    out.write(rest)
    out.flush()
    os.fsync(out.fileno())
    out.close()


def _place(partial: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(partial, target)
