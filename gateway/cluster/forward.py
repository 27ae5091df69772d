"""Sending a call on to the node that serves its workspace (``run:scale-out``).

The proxy (:mod:`gateway.edge.proxy`) streams the request and the answer exactly as it does with a
local engine; this module only builds the request: the client's MCP headers (never its
``Authorization``, never an ``X-Almanac-*`` it made up), the principal the edge resolved, and the
HMAC signature of :mod:`gateway.cluster.signing`. The owner node's side is
:mod:`gateway.cluster.forwarded_mcp`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from starlette.types import Receive, Send

from gateway import headers as hdr
from gateway import logs
from gateway.cluster import signing
from gateway.cluster.placement import Forward
from gateway.cluster.replay import ReplayCache
from gateway.cluster.router import Router
from gateway.control.records import Principal
from gateway.errors import ClusterSignatureInvalid, ClusterSignatureReplayed, GatewayError, NodeUnavailable

#: The owner node's endpoint for forwarded MCP calls.
INTERNAL_MCP_PATH = "/internal/v1/mcp"
#: The owner node's endpoint for forwarded REST calls (``/api/v1/X`` goes to ``…/rest/api/v1/X``).
INTERNAL_REST_PREFIX = "/internal/v1/rest"
#: The ASGI scope key of a call the edge node authenticated: the principal it speaks for. Only
#: server code sets scope keys; a client cannot.
FORWARDED_PRINCIPAL = "almanac.forwarded_principal"
#: The methods of MCP's HTTP transport: what ``/mcp`` and the owner node's endpoint accept.
METHODS = ("POST", "GET", "DELETE")

#: Sends a built request upstream and returns its response, body not read yet.
Upstream = Callable[[httpx.Request], Awaitable[httpx.Response]]


#: How long, by default, a node waits for the node it forwards a call to (seconds): to connect, to
#: send the call, for the start of the answer and between two pieces of it (setting ``forward_timeout``).
FORWARD_TIMEOUT_S = 60.0


def unreachable(where: Forward, retry_after: float, timeout: float) -> Callable[[], NodeUnavailable]:
    """The refusal for a forwarded call whose node cannot be reached or does not answer within
    ``timeout`` seconds (503 + Retry-After)."""
    return lambda: NodeUnavailable(
        f"node {where.node!r}, which serves this workspace, cannot be reached or did not answer within "
        f"{timeout:g} s; try again",
        retry_after=retry_after,
    )


def via_client(client: httpx.AsyncClient) -> Upstream:
    """Send through ``client`` (its settings: base URL, timeouts), streaming the response."""

    async def send(request: httpx.Request) -> httpx.Response:
        return await client.send(request, stream=True)

    return send


def refused_between_nodes(upstream: httpx.Response) -> None:
    """A 401 from the owner node refuses the *nodes'* signature (the client was authenticated here):
    to the client that is a node it cannot use now, not a bad token."""
    if upstream.status_code == 401:
        raise NodeUnavailable(
            "the node that serves this workspace refused this node's signature (the nodes' "
            "cluster_secret or clocks differ); try again later",
            retry_after=30.0,
        )


class Relay(Protocol):
    """What the owner node's endpoints and REST forwarding need of the proxy
    (:class:`~gateway.edge.proxy.McpProxy`, which the composition root passes in)."""

    @property
    def retry_after(self) -> float: ...

    async def read_body(self, raw_headers: hdr.RawHeaders, receive: Receive) -> bytes: ...

    async def serve_local(
        self,
        method: str,
        raw_headers: hdr.RawHeaders,
        body: bytes,
        principal: Principal,
        receive: Receive,
        send: Send,
    ) -> None: ...

    async def stream(
        self,
        upstream: Upstream,
        request: httpx.Request,
        principal: Principal,
        receive: Receive,
        send: Send,
        *,
        on_response: Callable[[httpx.Response], None],
        unreachable: Callable[[], GatewayError],
        response_headers: Callable[[hdr.RawHeaders], hdr.RawHeaders] = ...,
    ) -> None: ...


def forwarded_headers(raw_headers: hdr.RawHeaders, signed: signing.Signed) -> hdr.RawHeaders:
    """The client's MCP headers (the allowlist the engine gets) plus the signed principal."""
    kept = [
        (key.lower(), value)
        for key, value in raw_headers
        if key.lower() in hdr.REQUEST_ALLOW or key.lower().startswith(hdr.REQUEST_ALLOW_PREFIXES)
    ]
    return [
        *kept,
        (signing.PRINCIPAL_HEADER, signed.principal.encode("ascii")),
        (signing.SIGNATURE_HEADER, signed.signature.encode("ascii")),
    ]


class Forwarder:
    """Builds signed requests to other nodes and holds the one HTTP client that sends them."""

    def __init__(
        self, secret: str, *, timeout: float = FORWARD_TIMEOUT_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.secret, self.clock, self.timeout = secret, clock, timeout
        # every wait bounded, the read between two pieces of an answer too: a node that accepts a
        # call and never answers (hung, stopped) must not hold the call forever. A quiet SSE stream
        # is not cut as long as this is longer than the engines' keep-alive (every 15 s).
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout))

    def request(
        self,
        where: Forward,
        method: str,
        raw_headers: hdr.RawHeaders,
        body: bytes,
        principal: Principal,
        *,
        path: str = INTERNAL_MCP_PATH,
    ) -> httpx.Request:
        """A signed request to ``where`` (``path`` may carry a query string; it is signed with it)."""
        signed = signing.sign(
            self.secret,
            method=method,
            path=path,
            principal=principal,
            target=where.node,
            body=body,
            now=self.clock(),
        )
        return self.client.build_request(
            method,
            where.url + path,
            headers=forwarded_headers(raw_headers, signed),
            content=body or None,
        )

    async def aclose(self) -> None:
        await self.client.aclose()


@dataclass(frozen=True)
class ClusterLink:
    """What the proxy needs in node mode: where a workspace lives, and how to reach it."""

    here: str
    secret: str
    router: Router
    forwarder: Forwarder
    #: the nonces of the signed calls this node accepted within the signature's window
    replay: ReplayCache = field(default_factory=lambda: ReplayCache(signing.WINDOW_S))

    def verified(self, scope: Mapping[str, Any], body: bytes, *, path: str, now: float) -> Principal:
        """The principal a signed call from another node speaks for (``path`` as it was signed). A
        bad signature is logged (``cluster.signature_refused``) and refused: 401 — a replayed one
        with ``cluster_signature_replayed``."""
        raw_headers = list(scope["headers"])
        try:
            return signing.verify(
                self.secret,
                method=str(scope["method"]),
                path=path,
                principal_header=hdr.get(raw_headers, signing.PRINCIPAL_HEADER),
                signature_header=hdr.get(raw_headers, signing.SIGNATURE_HEADER),
                here=self.here,
                body=body,
                now=now,
                replay=self.replay,
            )
        except signing.SignatureInvalid as exc:
            remote = scope["client"][0] if scope.get("client") else None
            logs.event(
                logs.get(), logging.WARNING, "cluster.signature_refused", remote=remote, reason=str(exc)
            )
            raise refusal(exc) from None


def refusal(exc: signing.SignatureInvalid) -> ClusterSignatureInvalid:
    """The 401 a call refused for its signature gets."""
    if isinstance(exc, signing.SignatureReplayed):
        return ClusterSignatureReplayed(str(exc))
    return ClusterSignatureInvalid(str(exc))
