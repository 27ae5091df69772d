"""The owner node's side of another node's *pages* (``run:scale-out``): the engine calls
of :mod:`gateway.cluster.remote`.

- ``/internal/v1/engine/{mcp | admin/…}``: a signed request is passed to this node's engine for
  the workspace (its ``/mcp`` or its owner-only ``/admin`` routes), with the identity headers made
  from the *signed* principal (whatever ``X-Almanac-*`` the request carried is dropped), and the
  engine's answer streams back as it comes (an export's zip, an import's progress lines).
- ``/internal/v1/engine-control``: stop or restart the workspace's engine (after a restore, a
  settings change), or erase it for an account erase (the engine stopped for good, the folder and
  engine log deleted).

Like ``/internal/v1/mcp``: an unsigned, stale, or otherwise wrongly signed call is refused with
401 ``cluster_signature_invalid`` before anything is read or started; a signed call is served only
while this node holds the workspace's lease (never passed on again: 503 + Retry-After). Refusals of
the node itself carry ``X-Almanac-Refused-By-Node`` so the calling page tells them from its
engine's own answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import httpx
from starlette.types import Message, Receive, Scope, Send

from gateway import headers as hdr
from gateway import logs
from gateway.asgi import ClientGone, read_all
from gateway.cluster.forward import ClusterLink
from gateway.cluster.remote import INTERNAL_ENGINE_CONTROL, INTERNAL_ENGINE_PREFIX, REFUSED_BY_NODE
from gateway.cluster.rest import relayed_headers
from gateway.control.records import Principal
from gateway.engines.supervisor import Supervisor
from gateway.erasure import erase_files
from gateway.errors import (
    BadRequest,
    EngineUnreachable,
    GatewayError,
    NotFound,
    render,
)

#: The engine routes another node's pages may reach.
ENGINE_PATHS = ("/mcp", "/admin/")
ACTIONS = ("stop", "restart", "erase")


async def _refuse(send: Send, exc: GatewayError) -> None:
    status, headers, body = render(exc)
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    raw += [(b"content-length", str(len(body)).encode("ascii")), (REFUSED_BY_NODE, b"1")]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _target(scope: Scope) -> str:
    """The path as the sender wrote (and signed) it, percent-escapes kept, with its query."""
    raw = scope.get("raw_path")
    path = bytes(raw).decode("latin-1") if raw else str(scope["path"])
    query = bytes(scope.get("query_string", b""))
    return path + ("?" + query.decode("latin-1") if query else "")


class _Signed:
    """What both endpoints share: the signature check and "is it served here?"."""

    def __init__(
        self, link: ClusterLink, supervisor: Supervisor, *, max_body_bytes: int, clock: Callable[[], float]
    ) -> None:
        self.link, self.supervisor, self.max_body_bytes, self.clock = link, supervisor, max_body_bytes, clock
        self._log = logs.get()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            body = await read_all(receive, self.max_body_bytes)
            principal = self._verify(scope, body)
            await self.link.router.require_local(principal.workspace_id)
            await self.serve(scope, principal, body, tracked)
        except ClientGone:
            return
        except GatewayError as exc:
            if started:
                raise
            await _refuse(send, exc)

    def _verify(self, scope: Scope, body: bytes) -> Principal:
        return self.link.verified(scope, body, path=_target(scope), now=self.clock())

    async def serve(self, scope: Scope, principal: Principal, body: bytes, send: Send) -> None:
        raise NotImplementedError


class InternalEngine(_Signed):
    """``/internal/v1/engine/…``: one engine request from another node's page, served here."""

    async def serve(self, scope: Scope, principal: Principal, body: bytes, send: Send) -> None:
        inner = _target(scope)[len(INTERNAL_ENGINE_PREFIX) :]
        if not (inner.split("?", 1)[0] == ENGINE_PATHS[0] or inner.startswith(ENGINE_PATHS[1])):
            raise NotFound(f"nothing at {scope['path']}")
        kept = [
            (key.lower(), value)
            for key, value in scope["headers"]
            if key.lower() in hdr.REQUEST_ALLOW or key.lower().startswith(hdr.REQUEST_ALLOW_PREFIXES)
        ]
        headers = [*kept, (b"host", b"localhost"), *hdr.identity(principal)]
        async with self.supervisor.lease(principal.workspace_id) as lease:
            request = lease.client.build_request(
                str(scope["method"]), inner, headers=headers, content=body or None
            )
            try:
                upstream = await lease.client.send(request, stream=True)
            except httpx.TransportError as exc:
                raise EngineUnreachable(
                    "the workspace's engine did not answer; try again", retry_after=1
                ) from exc
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": upstream.status_code,
                        "headers": relayed_headers(list(upstream.headers.raw)),
                    }
                )
                async for chunk in upstream.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                await upstream.aclose()


class InternalEngineControl(_Signed):
    """``/internal/v1/engine-control``: stop, restart or erase the workspace's engine here."""

    async def serve(self, scope: Scope, principal: Principal, body: bytes, send: Send) -> None:
        try:
            asked: dict[str, Any] = json.loads(body)
            action = str(asked["action"])
            reason = str(asked.get("reason") or action)
        except (ValueError, KeyError, TypeError):
            raise BadRequest(
                'the body must be {"action": "stop" | "restart" | "erase", "reason": …}'
            ) from None
        if action not in ACTIONS:
            raise BadRequest(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        workspace_id = principal.workspace_id
        failed: list[str] = []
        if action == "stop":
            await self.supervisor.stop(workspace_id, reason=reason)
        elif action == "restart":
            await self.supervisor.restart(workspace_id, reason=reason)
        else:
            await self.supervisor.retire(workspace_id)
            failed = await anyio.to_thread.run_sync(
                erase_files, self.supervisor.config.data_dir, workspace_id
            )
            logs.event(
                self._log, logging.INFO, "workspace.erased", workspace=workspace_id, failed=len(failed)
            )
        reply = json.dumps({"action": action, "failed": failed}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(reply)).encode("ascii")),
                ],
            }
        )
        await send({"type": "http.response.body", "body": reply})


__all__ = ["INTERNAL_ENGINE_CONTROL", "INTERNAL_ENGINE_PREFIX", "InternalEngine", "InternalEngineControl"]
