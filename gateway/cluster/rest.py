"""The REST API (``/api/v1``) across nodes (``run:scale-out``), as :mod:`.forwarded_mcp` does
for ``/mcp``.

:class:`RestForwarding` (middleware, node mode): a ``/api/v1`` call is authenticated and
rate-limited here, then served here when this node holds the workspace, refused with 503 when
nobody can serve it now, or forwarded — streaming, signed, with the resolved principal, never the
token — to the owner's ``/internal/v1/rest/api/v1/…``. :class:`InternalRest` (the owner's side)
checks the signature (method, path *and query*, body), then runs the same ``/api/v1`` endpoint with
the principal the edge resolved.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import headers as hdr
from gateway.asgi import ClientGone, read_all, send_error
from gateway.cluster.forward import (
    FORWARDED_PRINCIPAL,
    INTERNAL_REST_PREFIX,
    ClusterLink,
    Relay,
    refused_between_nodes,
    unreachable,
    via_client,
)
from gateway.cluster.placement import Forward, Local, Unavailable
from gateway.cluster.router import unavailable
from gateway.control.records import Principal
from gateway.errors import (
    GatewayError,
    NotFound,
)

API_PREFIX = "/api/v1/"
_NOT_FORWARDED = ("/api/v1/openapi.json",)
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"date", b"server"})


def relayed_headers(raw: hdr.RawHeaders) -> hdr.RawHeaders:
    """A REST answer keeps its headers (an export's Content-Disposition, say), less hop-by-hop ones."""
    return [(k.lower(), v) for k, v in raw if k.lower() not in _HOP_BY_HOP]


def _query(scope: Scope) -> str:
    raw = bytes(scope.get("query_string", b""))
    return "?" + raw.decode("latin-1") if raw else ""


class RestForwarding:
    def __init__(
        self,
        app: ASGIApp,
        *,
        link: ClusterLink,
        proxy: Relay,
        principal: Any,  # RestApi._principal: (Request) -> Awaitable[Principal]
        max_body_bytes: int,
    ) -> None:
        self.app, self.link, self.proxy, self.principal_of = app, link, proxy, principal
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if (
            scope["type"] != "http"
            or not path.startswith(API_PREFIX)
            or path in _NOT_FORWARDED
            or FORWARDED_PRINCIPAL in scope
        ):
            await self.app(scope, receive, send)
            return
        try:
            principal: Principal = await self.principal_of(Request(scope))
            where = await self.link.router.route(principal.workspace_id)
            if isinstance(where, Unavailable):
                raise unavailable(where)
            if isinstance(where, Forward):
                await self._forward(where, principal, scope, receive, send)
                return
        except ClientGone:
            return
        except GatewayError as exc:
            await send_error(send, exc)
            return
        assert isinstance(where, Local)
        await self.app({**scope, FORWARDED_PRINCIPAL: principal}, receive, send)  # authenticated once

    async def _forward(
        self, where: Forward, principal: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        method, raw_headers = str(scope["method"]), list(scope["headers"])
        body = await read_all(receive, self.max_body_bytes)
        target = INTERNAL_REST_PREFIX + str(scope["path"]) + _query(scope)
        request = self.link.forwarder.request(where, method, raw_headers, body, principal, path=target)
        await self.proxy.stream(
            via_client(self.link.forwarder.client),
            request,
            principal,
            receive,
            send,
            on_response=refused_between_nodes,
            unreachable=unreachable(where, self.proxy.retry_after, self.link.forwarder.timeout),
            response_headers=relayed_headers,
        )


class InternalRest:
    """``/internal/v1/rest/api/v1/…``: a signed REST call from another node, served here."""

    def __init__(self, link: ClusterLink, *, max_body_bytes: int, retry_after: float, clock: Any) -> None:
        self.link, self.max_body_bytes, self.retry_after, self.clock = (
            link,
            max_body_bytes,
            retry_after,
            clock,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._handle(scope, receive, send)
        except ClientGone:
            return
        except GatewayError as exc:
            await send_error(send, exc)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_all(receive, self.max_body_bytes)
        principal = self.link.verified(scope, body, path=str(scope["path"]) + _query(scope), now=self.clock())
        inner = str(scope["path"])[len(INTERNAL_REST_PREFIX) :]
        if not inner.startswith(API_PREFIX):
            raise NotFound(f"nothing at {scope['path']}")
        await self.link.router.require_local(principal.workspace_id)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        inner_scope = {**scope, "path": inner, "raw_path": inner.encode(), FORWARDED_PRINCIPAL: principal}
        await scope["app"](inner_scope, replay, send)
