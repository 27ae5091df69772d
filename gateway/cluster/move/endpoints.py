"""A node's side of moving a workspace to another node (``run:scale-out``); the steps are driven by
``almanac workspace move`` (:mod:`gateway.cluster.move.driver`). Every endpoint here answers only the
cluster's own calls, signed with ``cluster_secret`` for this node and this workspace (401
otherwise), under ``/internal/v1/workspaces/{workspace_id}/``:

``POST …/snapshot``  (the source, while it serves the workspace and a move of it is under way) the
                     folder's manifest as it is now, so the target can copy it before the final sync;
``POST …/release``   (the source, the final sync) refuse the workspace here from now on (each call
                     told to wait the sync's expected time), wait for the calls in flight, stop its
                     engine, and answer the folder's manifest (path, size, SHA-256);
``GET  …/files/P``   (the source) one file of the folder, snapshotted or released;
``POST …/pull``      (the target) one pass (:mod:`gateway.cluster.pulls`): bring the staging folder
                     in line with a manifest of the source's folder, fetching only what differs;
                     the final pass checks every file's size and SHA-256, moves the folder into
                     place and answers the manifest of what is now on disk;
``POST …/open``      (the target, after the flip) start the workspace's engine on the copy;
``DELETE …``         (the source, after the target served it) delete the old copy — refused while
                     the control plane still places the workspace here;
``POST …/resume``    (the source, a move called off) serve the workspace here again;
``POST …/erase``     (an account erase, any node the moves records name) delete this node's copy
                     of the workspace — its folder, its staging folder, its engine log — refused
                     unless the control plane says its owner is being erased, and never the copy
                     the workspace is placed on (:func:`~gateway.cluster.journal.erase_copy_problem`).

Besides, with every heartbeat :meth:`MoveEndpoints.tend` looks after the moves that involve this
node, off the event loop: it calls off the moves away from here whose deadline passed (their command
died: the workspace is served here again) and the restores from a node declared lost whose deadline
passed (the workspace is lost again), stops refusing a workspace whose move has ended, and
removes the unused copy a move called off left here (never while a move to here is under way, and
only what :func:`~gateway.cluster.journal.stale_copy_problem` allows), removes every staging folder
no move or restore to here is using any more (one a killed node left, at its first heartbeat), and
deletes the folder of every workspace whose account was erased while this node was declared lost.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from gateway import logs
from gateway.asgi import off_loop
from gateway.cluster import manifest, pulls, signing
from gateway.cluster.forward import ClusterLink, refusal
from gateway.cluster.journal import erase_copy_problem, stale_copy_problem
from gateway.control.records import MoveRecord, Placement
from gateway.control.store import ControlPlane
from gateway.control.usage import measure
from gateway.engines.supervisor import Supervisor
from gateway.erasure import erase_files
from gateway.errors import (
    AlreadyExists,
    BadRequest,
    ClusterSignatureInvalid,
    Forbidden,
    MoveCalledOff,
    NotFound,
)

PREFIX = "/internal/v1/workspaces/{workspace_id}"
#: How long a release waits for the calls in flight before stopping the engine anyway (seconds).
DRAIN_TIMEOUT_S = 30.0
#: How often a pass checks, between files, that its move is still under way (seconds).
RECHECK_S = 1.0
#: The staging folder of a workspace coming here (a move's or a restore's) is ``.incoming-<id>``.
STAGING_PREFIX = ".incoming-"


files_path = pulls.files_path


class MoveEndpoints:
    def __init__(
        self,
        link: ClusterLink,
        supervisor: Supervisor,
        journal: ControlPlane,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.link, self.supervisor, self.journal, self.clock = link, supervisor, journal, clock
        self.placement = journal.nodes.placement
        self.root = supervisor.config.data_dir / "workspaces"
        self._log = logs.get()
        self._locks: dict[str, anyio.Lock] = {}  # a pull and a discard of one workspace never overlap
        self._copying: set[str] = set()  # snapshotted for a move while still served here
        self._hashes: dict[Path, manifest.Hashes] = {}  # a folder being moved, listed pass after pass

    def lock(self, workspace_id: str) -> anyio.Lock:
        return self._locks.setdefault(workspace_id, anyio.Lock())

    def routes(self) -> list[BaseRoute]:
        return [
            Route(PREFIX + "/snapshot", self.snapshot, methods=["POST"]),
            Route(PREFIX + "/release", self.release, methods=["POST"]),
            Route(PREFIX + "/files/{path:path}", self.file, methods=["GET"]),
            Route(PREFIX + "/pull", self.pull, methods=["POST"]),
            Route(PREFIX + "/open", self.open, methods=["POST"]),
            Route(PREFIX + "/resume", self.resume, methods=["POST"]),
            Route(PREFIX + "/erase", self.erase, methods=["POST"]),
            Route(PREFIX + "/usage", self.usage, methods=["GET"]),
            Route(PREFIX, self.delete, methods=["DELETE"]),
        ]

    async def verified(self, request: Request, *, streamed: bool = False) -> tuple[str, bytes]:
        """The workspace of a signed cluster call, and its body — or, ``streamed``, nothing read yet:
        the signature then covers the SHA-256 declared in ``x-almanac-content-sha256``, which the
        caller checks against the bytes as they arrive."""
        workspace_id = str(request.path_params["workspace_id"])
        digest = None
        if streamed:
            digest = request.headers.get(signing.CONTENT_DIGEST_HEADER.decode(), "")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ClusterSignatureInvalid(
                    "a streamed file's call declares its SHA-256 (64 hex digits) in x-almanac-content-sha256"
                )
        body = b"" if streamed else await request.body()
        try:
            signing.verify_cluster_call(
                self.link.secret,
                method=request.method,
                path=request.url.path,
                principal_header=request.headers.get(signing.PRINCIPAL_HEADER.decode()),
                signature_header=request.headers.get(signing.SIGNATURE_HEADER.decode()),
                workspace_id=workspace_id,
                here=self.link.here,
                body=body,
                now=self.clock(),
                replay=self.link.replay,
                digest=digest,
            )
        except signing.SignatureInvalid as exc:
            logs.event(self._log, logging.WARNING, "cluster.signature_refused", reason=str(exc))
            raise refusal(exc) from None
        if not manifest.safe_relative(workspace_id) or "/" in workspace_id:
            raise BadRequest(f"{workspace_id!r} is not a workspace id")
        return workspace_id, body

    def folder(self, workspace_id: str) -> Path:
        return self.root / workspace_id

    async def listing(self, folder: Path) -> tuple[manifest.Entry, ...]:
        """``folder``'s manifest, hashing again only what may have changed since the last listing."""
        hashes = self._hashes.setdefault(folder, manifest.Hashes())
        return await anyio.to_thread.run_sync(hashes.manifest, folder)

    def forget_listings(self, workspace_id: str) -> None:
        self._copying.discard(workspace_id)
        for folder in (self.folder(workspace_id), self.staging(workspace_id)):
            self._hashes.pop(folder, None)

    async def snapshot(self, request: Request) -> Response:
        """The folder's manifest while this node still serves the workspace: its files may be read
        (``GET …/files/P``) until the move ends."""
        workspace_id, _ = await self.verified(request)
        placement = await off_loop(self.placement, workspace_id)
        if placement is None or placement.node != self.link.here or placement.moving_to is None:
            raise Forbidden("no move of this workspace away from this node is under way")
        self._copying.add(workspace_id)
        found = await self.listing(self.folder(workspace_id))
        return JSONResponse({"manifest": manifest.to_json(found)})

    async def release(self, request: Request) -> Response:
        workspace_id, body = await self.verified(request)
        try:
            wait = float(json.loads(body).get("retry_after", 0.0)) if body else 0.0
        except (ValueError, AttributeError, TypeError):
            raise BadRequest('a release\'s body is {"retry_after": SECONDS}') from None
        # new calls: 503 workspace_moving from now on, told to wait the final sync's expected time
        self.link.router.hold(workspace_id, until=self.clock() + max(0.0, wait))
        began = time.monotonic()
        slot = self.supervisor.slot(workspace_id)
        with anyio.move_on_after(DRAIN_TIMEOUT_S):
            while slot.in_flight:
                await anyio.sleep(0.02)
        drained = time.monotonic()
        await self.supervisor.restart(workspace_id, reason="move")  # stopped: the folder is still
        stopped = time.monotonic()
        found = await self.listing(self.folder(workspace_id))
        logs.event(
            self._log,
            logging.INFO,
            "move.released",
            workspace=workspace_id,
            files=len(found),
            drain_s=round(drained - began, 3),
            stop_s=round(stopped - drained, 3),
            list_s=round(time.monotonic() - stopped, 3),
        )
        return JSONResponse({"manifest": manifest.to_json(found)})

    async def file(self, request: Request) -> Response:
        workspace_id, _ = await self.verified(request)
        path = str(request.path_params["path"])
        if not manifest.safe_relative(path):
            raise BadRequest(f"{path!r} leaves the workspace's folder")
        if workspace_id not in self.link.router.held and workspace_id not in self._copying:
            raise Forbidden("snapshot or release the workspace before copying its files")
        target = self.folder(workspace_id) / path
        if not target.is_file() or target.is_symlink():
            raise NotFound(f"no file {path!r} in workspace {workspace_id}")
        try:
            offset = int(request.query_params.get("offset", "0"))
            length = request.query_params.get("length")
            span = None if length is None else int(length)
        except ValueError:
            raise BadRequest("offset and length are whole numbers of bytes") from None
        if offset < 0 or (span is not None and span < 0):
            raise BadRequest("offset and length are whole numbers of bytes")
        if span is None and offset == 0:
            small = await anyio.to_thread.run_sync(pulls.read_small, target)
            if small is not None:  # read whole at once: a file replaced meanwhile is sent as it was
                return Response(small, media_type="application/octet-stream")
        try:
            chunks = pulls.file_chunks(target, offset, span)
            first = await anext(chunks, b"")
        except FileNotFoundError:
            raise NotFound(f"no file {path!r} in workspace {workspace_id}") from None

        async def body() -> AsyncIterator[bytes]:
            yield first
            async for chunk in chunks:
                yield chunk

        return StreamingResponse(body(), media_type="application/octet-stream")

    async def pull(self, request: Request) -> Response:
        workspace_id, body = await self.verified(request)
        try:
            order = pulls.order_of(json.loads(body))
        except ValueError as exc:
            raise BadRequest(f"a pull's body is JSON: {exc}") from None
        async with self.lock(workspace_id):
            answer = await self._pull(workspace_id, order)
        logs.event(
            self._log,
            logging.INFO,
            "move.pulled",
            workspace=workspace_id,
            source=order.source,
            final=order.final,
            fetched=answer["fetched"],
            list_s=answer["list_s"],
            fetch_s=answer["fetch_s"],
        )
        return JSONResponse(answer)

    async def _pull(self, workspace_id: str, order: pulls.Order) -> dict[str, Any]:
        """One pass (under the workspace's lock); any failure removes the staging folder."""
        folder, staging = self.folder(workspace_id), self.staging(workspace_id)
        if folder.exists() and any(folder.iterdir()):
            raise AlreadyExists(f"node {self.link.here!r} already has a folder for workspace {workspace_id}")
        await self._still_coming(workspace_id, order.move)
        if order.fresh:
            self._hashes.pop(staging, None)
            await anyio.to_thread.run_sync(pulls.discard, staging)
        checked = [time.monotonic()]

        async def still_wanted() -> None:
            if time.monotonic() - checked[0] >= RECHECK_S:
                checked[0] = time.monotonic()
                await self._still_coming(workspace_id, order.move)

        try:
            began = time.monotonic()
            hashes = self._hashes.setdefault(staging, manifest.Hashes())
            # nobody but this node writes its staging folder: what it noted is what is there (the
            # disk is read only when it has no record — the first pass, or after a restart)
            staged = hashes.recorded()
            if staged is None:
                staged = await self.listing(staging)
            todo = pulls.plan(order.wanted, staged)
            await anyio.to_thread.run_sync(pulls.remove, staging, todo.remove)
            hashes.drop(todo.remove)
            listed = time.monotonic()
            puller = pulls.Puller(self.link.secret, workspace_id, order, staging, hashes, self.clock)
            fetched = await puller.run(todo.fetch, staged or (), still_wanted)
            answer: dict[str, Any] = {
                "fetched": len(todo.fetch),
                "bytes": fetched,
                "list_s": round(listed - began, 3),
                "fetch_s": round(time.monotonic() - listed, 3),
            }
            if order.final:
                # the folder as it is on disk: a file whose size, times or inode are not those
                # noted when it was written is read and hashed again
                staged = await self.listing(staging)
                problems = manifest.differences(order.wanted, staged)
                if problems:
                    raise BadRequest("the copy differs from the original: " + "; ".join(problems[:10]))
                await self._still_coming(workspace_id, order.move)
                await anyio.to_thread.run_sync(lambda: settle(staging, folder))
                self._hashes.pop(staging, None)
                answer["manifest"] = manifest.to_json(staged)
            return answer
        except BaseException:
            self._hashes.pop(staging, None)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(pulls.discard, staging)
            raise

    async def _still_coming(self, workspace_id: str, move: str | None) -> None:
        """Raise unless a move of the workspace to this node (``move``, if named) is under way."""
        placement = await off_loop(self.placement, workspace_id)
        if self.placement_here(placement):
            raise BadRequest("this node already serves the workspace; nothing to pull")
        if placement is None or placement.moving_to != self.link.here:
            raise MoveCalledOff("the move was called off while its files were copied; the copy is dropped")
        if move is not None and placement.move_id != move:
            raise MoveCalledOff(f"move {move} is no longer the one under way; the copy is dropped")

    def staging(self, workspace_id: str) -> Path:
        return self.root / f"{STAGING_PREFIX}{workspace_id}"

    def receiving(self, workspace_id: str) -> Path:
        """Where a restored file is written until its SHA-256 is checked: beside the staging folder,
        not in it, so that no name a backup may hold can clash with it."""
        return self.root / f"{STAGING_PREFIX}{workspace_id}.receiving"

    def placement_here(self, placement: Placement | None) -> bool:
        return placement is not None and placement.node == self.link.here and placement.moving_to is None

    async def open(self, request: Request) -> Response:
        workspace_id, _ = await self.verified(request)
        self.link.router.forget(workspace_id)
        async with self.supervisor.lease(workspace_id):
            pass  # started on the copy and healthy: this node serves it
        return JSONResponse({"serving": workspace_id, "node": self.link.here})

    async def resume(self, request: Request) -> Response:
        """The move ended — called off (served here again) or switched (the placement sends its
        calls to the target): this node stops refusing the workspace on its own account."""
        workspace_id, _ = await self.verified(request)
        self.link.router.unhold(workspace_id)
        self.forget_listings(workspace_id)
        return JSONResponse({"serving": workspace_id, "node": self.link.here})

    async def delete(self, request: Request) -> Response:
        workspace_id, _ = await self.verified(request)
        async with self.lock(workspace_id):
            problem = await self._drop_problem(workspace_id)
            if problem is not None:
                raise Forbidden(problem)
            await self._drop(workspace_id)
        logs.event(self._log, logging.INFO, "move.deleted_old_copy", workspace=workspace_id)
        return JSONResponse({"deleted": workspace_id, "node": self.link.here})

    async def usage(self, request: Request) -> Response:
        """What this node's folder of a workspace holds (``almanac workspace usage`` run elsewhere)."""
        workspace_id, _ = await self.verified(request)
        folder = self.folder(workspace_id)
        found = await anyio.to_thread.run_sync(measure, folder)
        return JSONResponse({"folder": str(folder), "held": folder.is_dir(), "rows": found.rows()})

    async def erase(self, request: Request) -> Response:
        """An account erase: delete every copy this node keeps of a workspace placed elsewhere."""
        workspace_id, _ = await self.verified(request)
        async with self.lock(workspace_id):
            here = self.link.here
            problem = await off_loop(
                lambda: erase_copy_problem(
                    self.journal.erasure.being_erased(workspace_id),
                    self.journal.nodes.placement(workspace_id),
                    here,
                )
            )
            if problem is not None:
                raise Forbidden(problem)
            await self.supervisor.retire(workspace_id)
            data_dir, staging = self.supervisor.config.data_dir, self.staging(workspace_id)
            receiving = self.receiving(workspace_id)

            failed = await anyio.to_thread.run_sync(erase_files, data_dir, workspace_id, staging, receiving)
            self.link.router.unhold(workspace_id)
        logs.event(
            self._log, logging.INFO, "workspace.copy_erased", workspace=workspace_id, failed=len(failed)
        )
        return JSONResponse({"erased": workspace_id, "node": here, "failed": failed})

    async def _drop_problem(self, workspace_id: str) -> str | None:
        def read() -> str | None:
            placement = self.journal.nodes.placement(workspace_id)
            return stale_copy_problem(
                self.journal.moves.of_workspace(workspace_id), placement, self.link.here
            )

        return await off_loop(read)

    async def _drop(self, workspace_id: str) -> None:
        """Delete this node's stale copy (checked by the caller, under the workspace's lock)."""
        await self.supervisor.restart(workspace_id, reason="moved")
        folder, staging = self.folder(workspace_id), self.staging(workspace_id)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
        await anyio.to_thread.run_sync(lambda: self.receiving(workspace_id).unlink(missing_ok=True))
        self.link.router.unhold(workspace_id)
        self.forget_listings(workspace_id)

    async def tend(self) -> None:
        """One round of looking after this node's moves (every heartbeat; see the module's doc)."""
        here = self.link.here
        for move in await off_loop(lambda: self.journal.moves.call_off_lapsed(here, now=self.clock())):
            self.link.router.unhold(move.workspace_id)  # served here again
            logs.event(
                self._log, logging.WARNING, "move.called_off", workspace=move.workspace_id, move=move.id
            )
        for move in await off_loop(lambda: self.journal.moves.call_off_lapsed_restores(now=self.clock())):
            self.link.router.forget(move.workspace_id)  # lost again; its target discards what it got
            logs.event(
                self._log, logging.WARNING, "restore.called_off", workspace=move.workspace_id, move=move.id
            )
        for workspace_id in self.link.router.held | self._copying:
            placement = await off_loop(self.placement, workspace_id)
            if placement is None or placement.moving_to is None:  # its move ended (called off or switched)
                self.link.router.unhold(workspace_id)
                self.forget_listings(workspace_id)
        for move in await off_loop(self.journal.moves.leaving_copies):
            if move.state == "called_off" and move.target == here:
                await self._discard(move)
        await self._sweep_staging()
        for workspace_id in await off_loop(self.journal.lost.copies_to_erase, here):
            await self._erase_forgotten(workspace_id)

    async def _sweep_staging(self) -> None:
        """Remove every staging folder (and half-received file) here that no move or restore to
        this node is using: one a pass or a restore left when this node was killed, or whose move
        was called off while this node was away."""

        def leftovers() -> list[str]:
            if not self.root.is_dir():
                return []
            names = {p.name for p in self.root.iterdir() if p.name.startswith(STAGING_PREFIX)}
            return sorted({n.removeprefix(STAGING_PREFIX).removesuffix(".receiving") for n in names})

        for workspace_id in await anyio.to_thread.run_sync(leftovers):
            if not manifest.safe_relative(workspace_id) or "/" in workspace_id:
                continue
            async with self.lock(workspace_id):
                placement = await off_loop(self.placement, workspace_id)
                if placement is not None and placement.moving_to == self.link.here:
                    continue  # a move or a restore to here is under way: its folder
                staging, receiving = self.staging(workspace_id), self.receiving(workspace_id)
                self._hashes.pop(staging, None)
                await anyio.to_thread.run_sync(pulls.discard, staging)
                await anyio.to_thread.run_sync(receiving.unlink, True)
            logs.event(self._log, logging.INFO, "move.staging_removed", workspace=workspace_id)

    async def _erase_forgotten(self, workspace_id: str) -> None:
        """Delete the folder of a workspace whose account was erased while this node was declared
        lost (back with its disk: an erased account stays erased)."""
        here = self.link.here
        async with self.lock(workspace_id):
            await self.supervisor.retire(workspace_id)
            data_dir, staging = self.supervisor.config.data_dir, self.staging(workspace_id)
            receiving = self.receiving(workspace_id)
            failed = await anyio.to_thread.run_sync(erase_files, data_dir, workspace_id, staging, receiving)
        if not failed:
            await off_loop(self.journal.lost.forget_copy, here, workspace_id)
        logs.event(
            self._log, logging.INFO, "workspace.lost_copy_erased", workspace=workspace_id, failed=len(failed)
        )

    async def _discard(self, move: MoveRecord) -> None:
        """Remove the unused copy a move called off left here, if it is still the last move."""
        workspace_id = move.workspace_id
        async with self.lock(workspace_id):
            if await self._drop_problem(workspace_id) is not None:
                if self.folder(workspace_id).exists() or self.staging(workspace_id).exists():
                    return  # a later move governs this folder
            else:
                await self._drop(workspace_id)
            await off_loop(
                lambda: self.journal.moves.record(move.id, "discarded", now=self.clock(), note=move.note)
            )
        logs.event(self._log, logging.INFO, "move.discarded_copy", workspace=move.workspace_id, move=move.id)


def settle(staging: Path, folder: Path) -> None:
    """Move the checked copy into place (one rename) and make the rename durable."""
    if folder.exists():
        folder.rmdir()  # empty (checked before the pull)
    staging.mkdir(parents=True, exist_ok=True)
    os.replace(staging, folder)
    fd = os.open(folder.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
