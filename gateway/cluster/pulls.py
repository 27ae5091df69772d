"""Copying a workspace's folder from the node that serves it to the node it moves to, in passes
(``run:scale-out``; the endpoints are :mod:`gateway.cluster.move.endpoints`, the steps
:mod:`gateway.cluster.move.driver`).

A pass brings the target's staging folder ``.incoming-<workspace>`` in line with a manifest of the
source's folder: it fetches every file whose size or SHA-256 the staging folder does not have yet
(:data:`FETCHES_AT_ONCE` at a time) and removes those the source no longer has. The passes before
the final sync run while the source still serves the workspace, so a file may change while it is
copied: what arrived is simply compared again at the next pass. The final pass runs once the
source has stopped the workspace's engine: every file must then arrive exactly as its manifest says.

A source that stops answering (killed, its network gone) ends the pass with
:class:`~gateway.errors.MoveSourceUnreachable`, naming the node; a file it no longer has (removed
by its engine since the manifest) is skipped before the final pass, an error in it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from gateway.cluster import manifest, signing
from gateway.errors import BadRequest, MoveSourceUnreachable

#: How many files a pass fetches at once.
FETCHES_AT_ONCE = 8
_CHUNK = 1 << 20
_TIMEOUT = httpx.Timeout(60.0)


@dataclass(frozen=True)
class Order:
    """One pull, as the move's command asks for it."""

    source: str  # the node the files come from
    url: str  # its advertise URL
    wanted: tuple[manifest.Entry, ...]  # the source's folder, as it listed it
    move: str | None  # the move under way (None: any move of the workspace to here)
    fresh: bool  # the first pass: start from an empty staging folder
    final: bool  # the final sync: the source's engine is stopped, every file must match exactly


def order_of(raw: Any) -> Order:
    """A pull's order from its JSON body; :class:`BadRequest` if it is not one."""
    try:
        return Order(
            str(raw["source"]),
            str(raw["url"]).rstrip("/"),
            manifest.from_json(raw["manifest"]),
            None if raw.get("move") is None else str(raw["move"]),
            bool(raw.get("fresh", True)),
            bool(raw.get("final", True)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadRequest(f"a pull needs source, url and manifest: {exc}") from None


@dataclass(frozen=True)
class Plan:
    """What a pass does to the staging folder."""

    fetch: tuple[manifest.Entry, ...]
    remove: tuple[str, ...]


def plan(wanted: tuple[manifest.Entry, ...], staged: tuple[manifest.Entry, ...]) -> Plan:
    """Fetch what the staging folder lacks or holds otherwise; remove what the source no longer has."""
    have = {e.path: e for e in staged}
    names = {e.path for e in wanted}
    return Plan(
        tuple(e for e in wanted if have.get(e.path) != e),
        tuple(sorted(p for p in have if p not in names)),
    )


def files_path(workspace_id: str, path: str) -> str:
    return f"/internal/v1/workspaces/{workspace_id}/files/{path}"


@dataclass(frozen=True)
class Puller:
    """Fetches files of ``workspace_id`` from ``order.source`` into ``staging``, signed as node
    ``here`` would sign them."""

    secret: str
    workspace_id: str
    order: Order
    staging: Path
    hashes: manifest.Hashes  # the staging folder's: each file fetched is noted in it
    clock: Callable[[], float]

    async def run(
        self,
        fetch: tuple[manifest.Entry, ...],
        staged: tuple[manifest.Entry, ...],
        still_wanted: Callable[[], Any],
    ) -> int:
        """Fetch ``fetch`` (at most :data:`FETCHES_AT_ONCE` at once) — of a large file the staging
        folder holds (``staged``), only the blocks that differ — asking ``still_wanted`` (an async
        callable raising when the move was called off) between files; the bytes fetched."""
        pending = list(fetch)
        held = {e.path: e for e in staged}
        fetched = 0

        async def worker(client: httpx.AsyncClient) -> None:
            nonlocal fetched
            while pending:
                entry = pending.pop()
                await still_wanted()
                have = held.get(entry.path)
                if entry.blocks and have is not None and have.blocks:
                    fetched += await self.patch(client, entry, have)
                else:
                    fetched += await self.fetch(client, entry)

        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client, anyio.create_task_group() as tg:
                for _ in range(min(FETCHES_AT_ONCE, len(pending))):
                    tg.start_soon(worker, client)
        except BaseExceptionGroup as group:  # the first failure stopped the others: that one
            raise _first(group) from None
        return fetched

    def unreachable(self, exc: Exception) -> MoveSourceUnreachable:
        source = self.order.source
        return MoveSourceUnreachable(
            f"node {source!r}, the move's source (at {self.order.url}), stopped answering while its files "
            f"were copied ({type(exc).__name__}: {exc}); the partial copy is removed and the move is "
            f"called off: the workspace stays on {source!r} — served there again, or refused with "
            f"node_unavailable while that node is down. Check that node (`almanac node list`; start it "
            "again if it died), then run the move again"
        )

    def _headers(self, path: str) -> dict[str, str]:
        signed = signing.sign(
            self.secret,
            method="GET",
            path=path,
            principal=None,
            workspace_id=self.workspace_id,
            target=self.order.source,
            body=b"",
            now=self.clock(),
        )
        return {
            signing.PRINCIPAL_HEADER.decode(): signed.principal,
            signing.SIGNATURE_HEADER.decode(): signed.signature,
        }

    async def _get(
        self, client: httpx.AsyncClient, entry: manifest.Entry, out: Any, span: tuple[int, int] | None
    ) -> int | None:
        """Write the source's file (or ``span``: offset and length) into ``out`` at its position;
        the bytes written, or None when the source no longer has it (before the final pass)."""
        path = files_path(self.workspace_id, entry.path)
        params = None if span is None else {"offset": span[0], "length": span[1]}
        written = 0
        try:
            async with client.stream(
                "GET", self.order.url + quote(path), params=params, headers=self._headers(path)
            ) as response:
                if response.status_code == 404 and not self.order.final:
                    return None  # removed since the source listed it: the next pass sees it gone
                if response.status_code != 200:
                    source, status = self.order.source, response.status_code
                    raise BadRequest(f"node {source!r} did not give {entry.path!r} (HTTP {status})")
                async for chunk in response.aiter_bytes(_CHUNK):
                    written += len(chunk)
                    await anyio.to_thread.run_sync(out.write, chunk)
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from exc
        return written

    async def fetch(self, client: httpx.AsyncClient, entry: manifest.Entry) -> int:
        """One whole file into the staging folder; before the final pass a file the source no
        longer has is skipped (0 bytes), in it every file must be the manifest's."""
        if entry.size <= manifest.BLOCK:
            return await self.fetch_small(client, entry)
        destination = self.staging / entry.path
        out = await anyio.to_thread.run_sync(lambda: _open(destination, "wb"))
        try:
            size = await self._get(client, entry, out, None)
            await anyio.to_thread.run_sync(lambda: _sync(out))
        finally:
            out.close()
        if size is None:
            await anyio.to_thread.run_sync(lambda: destination.unlink(missing_ok=True))
            return 0
        await self._check(entry)
        return size

    async def fetch_small(self, client: httpx.AsyncClient, entry: manifest.Entry) -> int:
        """A small file (most of a store): read whole, then written, synced and hashed at once."""
        path = files_path(self.workspace_id, entry.path)
        try:
            async with client.stream("GET", self.order.url + quote(path), headers=self._headers(path)) as r:
                if r.status_code == 404 and not self.order.final:
                    destination = self.staging / entry.path
                    await anyio.to_thread.run_sync(lambda: destination.unlink(missing_ok=True))
                    return 0  # removed since the source listed it: the next pass sees it gone
                if r.status_code != 200:
                    source, status = self.order.source, r.status_code
                    raise BadRequest(f"node {source!r} did not give {entry.path!r} (HTTP {status})")
                body = bytearray()
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > 2 * manifest.BLOCK:  # grown since it was listed: the next pass
                        break
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from exc
        found = await anyio.to_thread.run_sync(lambda: _store(self.staging / entry.path, bytes(body)))
        self._verify(entry, *found)
        return len(body)

    def _verify(self, entry: manifest.Entry, size: int, sha: str, blocks: tuple[str, ...]) -> None:
        if self.order.final and (size, sha) != (entry.size, entry.sha256):
            raise BadRequest(
                f"{entry.path!r} arrived damaged (size {size}, sha256 {sha}, not the {entry.size} bytes "
                f"and sha256 {entry.sha256} its source listed); the move is called off"
            )
        self.hashes.note(self.staging, entry.path, sha, blocks)

    async def patch(self, client: httpx.AsyncClient, entry: manifest.Entry, have: manifest.Entry) -> int:
        """A large file the staging folder holds an older copy of: only the blocks that differ are
        fetched, written in place, and the file cut to its new size."""
        spans = changed_spans(entry, have)
        destination = self.staging / entry.path
        out = await anyio.to_thread.run_sync(lambda: _open(destination, "r+b"))
        fetched = 0
        try:
            for offset, length in spans:
                await anyio.to_thread.run_sync(out.seek, offset)
                got = await self._get(client, entry, out, (offset, length))
                if got is None:
                    break
                fetched += got
            await anyio.to_thread.run_sync(out.truncate, entry.size)
            await anyio.to_thread.run_sync(lambda: _sync(out))
        finally:
            out.close()
        await self._check(entry)
        return fetched

    async def _check(self, entry: manifest.Entry) -> None:
        """Hash what the staging folder now holds of ``entry`` (noted for the next pass); in the
        final pass it must be exactly the file its source listed."""
        destination = self.staging / entry.path

        def measured() -> tuple[int, str, tuple[str, ...]]:
            return (destination.stat().st_size, *manifest.digests(destination))

        self._verify(entry, *await anyio.to_thread.run_sync(measured))


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    found = group.exceptions[0]
    return _first(found) if isinstance(found, BaseExceptionGroup) else found


def changed_spans(entry: manifest.Entry, have: manifest.Entry) -> list[tuple[int, int]]:
    """The byte ranges (offset, length) of ``entry``'s blocks that ``have`` lacks or holds otherwise,
    neighbours joined."""
    spans: list[tuple[int, int]] = []
    for i, block in enumerate(entry.blocks):
        if i < len(have.blocks) and have.blocks[i] == block:
            continue
        offset = i * manifest.BLOCK
        length = min(manifest.BLOCK, entry.size - offset)
        if spans and spans[-1][0] + spans[-1][1] == offset:
            spans[-1] = (spans[-1][0], spans[-1][1] + length)
        else:
            spans.append((offset, length))
    return spans


def _store(destination: Path, body: bytes) -> tuple[int, str, tuple[str, ...]]:
    """Write ``body`` to ``destination``, durably; its size, SHA-256 and blocks."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    with destination.open("wb") as out:
        out.write(body)
        _sync(out)
    return len(body), hashlib.sha256(body).hexdigest(), ()


def _open(destination: Path, mode: str) -> Any:
    destination.parent.mkdir(parents=True, exist_ok=True)
    return destination.open(mode)


def _sync(out: Any) -> None:
    out.flush()
    os.fsync(out.fileno())


def remove(staging: Path, paths: tuple[str, ...]) -> None:
    """Remove files the source no longer has from the staging folder."""
    for path in paths:
        (staging / path).unlink(missing_ok=True)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


def read_small(target: Path) -> bytes | None:
    """The whole file if it is at most :data:`~gateway.cluster.manifest.BLOCK` bytes (else None)."""
    try:
        with target.open("rb") as f:
            found = f.read(manifest.BLOCK + 1)
    except (FileNotFoundError, IsADirectoryError):
        return None
    return found if len(found) <= manifest.BLOCK else None


async def file_chunks(target: Path, offset: int = 0, length: int | None = None) -> AsyncIterator[bytes]:
    """A file of the source's folder (or ``length`` bytes of it from ``offset``) as it is read —
    opened once, so a file replaced meanwhile (an atomic rename) is sent whole as it was; sent
    without a length, so one that shrinks meanwhile ends early (the target then compares it again at
    the next pass)."""
    handle = await anyio.to_thread.run_sync(target.open, "rb")
    left = -1 if length is None else length
    try:
        await anyio.to_thread.run_sync(handle.seek, offset)
        while left != 0:
            chunk = await anyio.to_thread.run_sync(handle.read, _CHUNK if left < 0 else min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk) if left > 0 else 0
            yield chunk
    finally:
        handle.close()
