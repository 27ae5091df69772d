"""Engines anywhere: what the server-rendered pages lease an engine through
(``run:scale-out``).

In node mode a browser may reach any node, and the workspace it looks at may be placed on another.
The page is rendered here (its session and CSRF token are checked here, in the shared control
plane); only the *engine call* travels. :meth:`Engines.lease` routes the workspace like any call:

- served here → the supervisor's lease (a client on the local engine's Unix socket);
- placed on another node → a :class:`RemoteLease` whose client looks the same to
  :mod:`gateway.engines.calls` and :mod:`gateway.engines.admin`, but sends each request, signed
  (:mod:`gateway.cluster.signing`: method, path and query, timestamp, workspace, target node, the
  caller's identity, body — never the browser's cookie), to the owner's ``/internal/v1/engine/…``
  (:mod:`gateway.cluster.forwarded_engine`), which passes it to its engine and streams the answer
  back (an export, an import's progress);
- nobody can serve it now (its node down, its lease run out, being moved) → 503 + Retry-After,
  and nothing is sent anywhere: never a second engine.

:meth:`Engines.stop` / :meth:`Engines.restart` (after a restore, after a settings change) and
:meth:`Engines.erase_elsewhere` (an account erase) likewise act where the workspace lives.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

import httpx

from gateway.cluster import signing
from gateway.cluster.forward import ClusterLink
from gateway.cluster.placement import Forward, Local, Unavailable
from gateway.control.records import Principal
from gateway.control.store import ControlPlane
from gateway.engines.supervisor import Lease, Supervisor, SupervisorConfig
from gateway.errors import (
    ControlPlaneUnavailable,
    EngineCapacity,
    EngineCrashLoop,
    EngineStartFailed,
    EngineStartTimeout,
    EngineUnreachable,
    GatewayError,
    NodeUnavailable,
    PayloadTooLarge,
    WorkspaceLost,
    WorkspaceMoving,
    WorkspaceNotFound,
    WorkspaceRestoring,
    WorkspaceUnavailable,
    WorkspaceVolumeMissing,
)

#: The owner node's endpoint for engine calls made by another node's pages (``/mcp``, ``/admin/…``
#: of the engine go to ``…/engine/mcp``, ``…/engine/admin/…``).
INTERNAL_ENGINE_PREFIX = "/internal/v1/engine"
#: The owner node's endpoint for stopping, restarting or erasing a workspace's engine for a page.
INTERNAL_ENGINE_CONTROL = "/internal/v1/engine-control"
#: Marks an answer the owner *node* gave (a refusal), not one its engine gave.
REFUSED_BY_NODE = b"x-almanac-refused-by-node"

Action = Literal["stop", "restart", "erase"]

#: The identity an engine call carries when the page set none (the ``/admin`` routes): the owner's
#: dashboard, the same name the pages give their tool calls.
_DASHBOARD = ("web", "Dashboard")


_REFUSALS: dict[str, type[WorkspaceUnavailable]] = {
    cls.code: cls
    for cls in (
        NodeUnavailable,
        WorkspaceMoving,
        WorkspaceRestoring,
        WorkspaceLost,
        EngineStartFailed,
        EngineStartTimeout,
        EngineCapacity,
        EngineCrashLoop,
        EngineUnreachable,
        ControlPlaneUnavailable,
        WorkspaceVolumeMissing,
        WorkspaceUnavailable,
    )
}


def caller_of(headers: httpx.Headers, workspace_id: str) -> Principal:
    """The principal an engine request speaks for, read back from the identity headers the page's
    call put on it (:func:`gateway.headers.identity`); the dashboard's when it has none."""
    connection_id = headers.get("x-almanac-connection-id") or _DASHBOARD[0]
    name = unquote(headers.get("x-almanac-connection") or _DASHBOARD[1])
    return Principal(
        owner_id="",
        workspace_id=workspace_id,
        connection_id=connection_id,
        connection_name=name,
        read_only=headers.get("x-almanac-read-only") == "1",
        scope=headers.get("x-almanac-scope"),
        reads_unscoped=headers.get("x-almanac-scope-unscoped") == "1",
    )


def refusal_of(status: int, body: bytes, retry_after: str | None, node: str) -> GatewayError:
    """The error the page raises for the owner node's own refusal (not its engine's answer)."""
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "", f"node {node!r} answered {status}"
    wait = float(retry_after) if retry_after and retry_after.isdigit() else 1.0
    if status == 401:
        return NodeUnavailable(
            f"node {node!r}, which serves this workspace, refused this node's signature (the nodes' "
            "cluster_secret or clocks differ); try again later",
            retry_after=30.0,
        )
    if status == 404 and code == WorkspaceNotFound.code:
        return WorkspaceNotFound(message)
    if status == 413:
        return PayloadTooLarge(message)
    return _REFUSALS.get(code, WorkspaceUnavailable)(message, retry_after=wait)


def _try_again(retry_after: float) -> str:
    return f"try again in {max(1, math.ceil(retry_after))} s"


def node_down(what: str, retry_after: float) -> NodeUnavailable:
    """The page's refusal when the workspace's node cannot serve it (503 + Retry-After)."""
    return NodeUnavailable(
        f"This workspace's node is unavailable ({what}); {_try_again(retry_after)}.", retry_after=retry_after
    )


def page_refusal(
    where: Unavailable,
) -> NodeUnavailable | WorkspaceMoving | WorkspaceRestoring | WorkspaceLost:
    """What a page says when nobody can serve the workspace now (503 + Retry-After; 410 when its
    node was declared lost)."""
    if where.volume:
        return WorkspaceVolumeMissing(
            f"This workspace cannot be served: {where.reason}. Nothing was changed.", retry_after=0.0
        )
    if where.lost:
        return WorkspaceLost(
            f"This workspace cannot be served: {where.reason}. Nothing was changed.", retry_after=0.0
        )
    if where.restoring:
        return WorkspaceRestoring(
            f"This workspace is being restored from a backup; {_try_again(where.retry_after)}.",
            retry_after=where.retry_after,
        )
    if where.moving:
        return WorkspaceMoving(
            f"This workspace is being moved to another node; {_try_again(where.retry_after)}.",
            retry_after=where.retry_after,
        )
    return node_down(where.reason, where.retry_after)


class SignedTransport(httpx.AsyncBaseTransport):
    """An engine client's transport that reaches the engine through its owner node: each request
    is read whole (its body is signed), signed for ``where`` and sent to the owner's internal
    endpoint; the answer streams back as it comes. An owner that does not answer is 503 + the
    cluster's Retry-After: "this workspace's node is unavailable"."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        link: ClusterLink,
        where: Forward,
        workspace_id: str,
        retry_after: float,
    ) -> None:
        self.inner, self.link, self.where, self.workspace_id = inner, link, where, workspace_id
        self.retry_after = retry_after

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        principal = caller_of(request.headers, self.workspace_id)
        target = INTERNAL_ENGINE_PREFIX + request.url.raw_path.decode("ascii")
        outgoing = self.link.forwarder.request(
            self.where, request.method, list(request.headers.raw), body, principal, path=target
        )
        try:
            response = await self.inner.handle_async_request(outgoing)
        except httpx.TransportError as exc:
            raise node_down(self.where.node, self.retry_after) from exc
        if response.headers.get(REFUSED_BY_NODE.decode()):
            content = await response.aread()
            await response.aclose()
            raise refusal_of(
                response.status_code, content, response.headers.get("retry-after"), self.where.node
            )
        return response

    async def aclose(self) -> None:
        """The inner transport's connections are shared by every remote lease: kept open."""


@dataclass(frozen=True)
class RemoteLease:
    """An engine on another node, held for one page's request (``client`` as a local lease's)."""

    client: httpx.AsyncClient
    node: str


EngineLease = Lease | RemoteLease


class Engines:
    """The pages' way to an engine: here through the supervisor, or on the workspace's node."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.link: ClusterLink | None = None  # set in node mode (the composition root)
        self._inner: httpx.AsyncHTTPTransport | None = None

    @property
    def config(self) -> SupervisorConfig:
        return self.supervisor.config

    def spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        self.supervisor.spawn(work)

    async def _where(self, workspace_id: str) -> Local | Forward:
        assert self.link is not None
        where = await self.link.router.route(workspace_id)
        if isinstance(where, Unavailable):
            raise page_refusal(where)
        return where

    @asynccontextmanager
    async def lease(self, workspace_id: str) -> AsyncIterator[EngineLease]:
        """An engine for ``workspace_id`` for the length of a page's request, wherever it runs."""
        where = Local() if self.link is None else await self._where(workspace_id)
        if isinstance(where, Local):
            async with self.supervisor.lease(workspace_id) as lease:
                yield lease
            return
        assert self.link is not None
        if self._inner is None:
            self._inner = httpx.AsyncHTTPTransport()
        transport = SignedTransport(
            self._inner, self.link, where, workspace_id, self.supervisor.config.retry_after
        )
        async with httpx.AsyncClient(
            transport=transport, base_url="http://engine", timeout=httpx.Timeout(10.0, read=None)
        ) as client:
            yield RemoteLease(client, where.node)

    async def _control(self, workspace_id: str, action: Action, reason: str) -> dict[str, object] | None:
        """Run ``action`` where the workspace lives; the owner node's reply (None when local)."""
        where = Local() if self.link is None else await self._where(workspace_id)
        if isinstance(where, Local):
            return None
        assert self.link is not None
        body = json.dumps({"action": action, "reason": reason}).encode()
        principal = caller_of(httpx.Headers(), workspace_id)
        request = self.link.forwarder.request(
            where,
            "POST",
            [(b"content-type", b"application/json")],
            body,
            principal,
            path=INTERNAL_ENGINE_CONTROL,
        )
        try:
            response = await self.link.forwarder.client.send(request)
        except httpx.TransportError as exc:
            raise node_down(where.node, self.supervisor.config.retry_after) from exc
        if response.status_code != 200:
            raise refusal_of(
                response.status_code, response.content, response.headers.get("retry-after"), where.node
            )
        found: dict[str, object] = response.json()
        return found

    async def stop(self, workspace_id: str, *, reason: str) -> None:
        """Stop the engine (unless calls are in flight) wherever it runs: the next call reads afresh."""
        if await self._control(workspace_id, "stop", reason) is None:
            await self.supervisor.stop(workspace_id, reason=reason)

    async def restart(self, workspace_id: str, *, reason: str = "settings") -> None:
        """Restart the engine wherever it runs (a changed setting is read by the next one)."""
        if await self._control(workspace_id, "restart", reason) is None:
            await self.supervisor.restart(workspace_id, reason=reason)

    async def erase_elsewhere(self, workspace_id: str) -> list[str] | None:
        """Erase a workspace placed on another node there (its engine stopped for good, its folder
        and engine log deleted): what could not be deleted, its node unreachable included. None
        when the workspace lives here: the caller erases it here."""
        try:
            reply = await self._control(workspace_id, "erase", "erase")
        except GatewayError as exc:
            return [f"workspace {workspace_id}: {exc.message}"]
        if reply is None:
            return None
        failed = reply.get("failed")
        return [str(p) for p in failed] if isinstance(failed, list) else []

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


def erase_on_their_nodes(
    store: ControlPlane, secret: str, workspace_ids: list[str], *, clock: Callable[[], float]
) -> tuple[list[str], list[str]]:
    """``almanac owner erase --finish`` in a cluster: ask each placed workspace's node, signed, to
    erase it there (``/internal/v1/engine-control``). Returns the workspaces placed nowhere (their
    files, if any, are in this data directory) and what could not be deleted."""
    nodes = {n.name: n for n in store.nodes.all()}
    unplaced: list[str] = []
    failed: list[str] = []
    body = json.dumps({"action": "erase", "reason": "erase"}).encode()
    with httpx.Client(timeout=httpx.Timeout(30.0, read=120.0)) as http:
        for workspace_id in workspace_ids:
            placement = store.nodes.placement(workspace_id)
            node = None if placement is None else nodes.get(placement.node)
            if placement is None:
                unplaced.append(workspace_id)
                continue
            if node is None:
                failed.append(f"workspace {workspace_id}: its node {placement.node!r} is not registered")
                continue
            principal = caller_of(httpx.Headers(), workspace_id)
            signed = signing.sign(
                secret,
                method="POST",
                path=INTERNAL_ENGINE_CONTROL,
                principal=principal,
                target=node.name,
                body=body,
                now=clock(),
            )
            headers = {
                "content-type": "application/json",
                signing.PRINCIPAL_HEADER.decode(): signed.principal,
                signing.SIGNATURE_HEADER.decode(): signed.signature,
            }
            try:
                reply = http.post(node.advertise_url + INTERNAL_ENGINE_CONTROL, content=body, headers=headers)
            except httpx.TransportError as exc:
                failed.append(f"workspace {workspace_id}: node {node.name!r} cannot be reached ({exc})")
                continue
            if reply.status_code != 200:
                why = refusal_of(reply.status_code, reply.content, None, node.name).message
                failed.append(f"workspace {workspace_id} on node {node.name!r}: {why}")
                continue
            failed += [str(p) for p in reply.json().get("failed", [])]
    return unplaced, failed
