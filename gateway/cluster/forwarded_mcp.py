"""The owner node's side of a forwarded call: ``/internal/v1/mcp`` (``run:scale-out``).

Only other nodes call it. A request must carry a principal and a valid HMAC signature made with the
cluster secret for this node, this path, this body and a timestamp within the window; anything else
is refused with 401 ``cluster_signature_invalid`` before anything is read from the control plane or
started. A client's bearer token means nothing here (it is not even looked at). A signed call is
served only while this node holds the workspace's lease; it is never forwarded again (no loops):
otherwise it gets 503 + Retry-After, and the edge node passes that on.

:class:`AdvertisedOnly` keeps every ``/internal/v1`` endpoint to the node's advertise address: a
request whose ``Host`` is any other (the public name an Ingress or a load balancer serves, e.g.
``mem.example.com``) gets 404 before its signature is even looked at. The nodes, and the move and
restore commands, call each other at their advertise URLs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.asgi import ClientGone, send_error
from gateway.cluster.forward import METHODS, ClusterLink, Relay
from gateway.errors import GatewayError, MethodNotAllowed, NotFound

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _netloc(host: str, scheme: str) -> str:
    """``host[:port]`` lower-cased, without the scheme's default port."""
    host = host.strip().lower()
    default = f":{_DEFAULT_PORTS.get(scheme, 0)}"
    return host.removesuffix(default) if host.endswith(default) else host


class AdvertisedOnly:
    """An internal endpoint answered only when called at ``advertise_url``'s host and port."""

    def __init__(self, app: ASGIApp, advertise_url: str) -> None:
        parts = urlsplit(advertise_url)
        self.app, self.scheme = app, parts.scheme
        self.netloc = _netloc(parts.netloc, parts.scheme)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
            if _netloc(host, self.scheme) != self.netloc:
                await send_error(
                    send,
                    NotFound(
                        f"nothing at {scope['path']} here: the nodes' internal endpoints answer only at "
                        "the node's advertise URL"
                    ),
                )
                return
        await self.app(scope, receive, send)


class InternalMcp:
    def __init__(self, proxy: Relay, link: ClusterLink, *, clock: Callable[[], float] = time.time) -> None:
        self.proxy, self.link, self.clock = proxy, link, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - mounted for HTTP only
            return
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._handle(scope, receive, tracked_send)
        except ClientGone:
            pass
        except GatewayError as exc:
            if started:
                raise
            await send_error(tracked_send, exc)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, raw_headers = str(scope["method"]), list(scope["headers"])
        if method not in METHODS:
            raise MethodNotAllowed(f"{scope['path']} accepts {', '.join(METHODS)}", allow=METHODS)
        body = await self.proxy.read_body(raw_headers, receive) if method == "POST" else b""
        principal = self.link.verified(scope, body, path=str(scope["path"]), now=self.clock())
        await self.link.router.require_local(principal.workspace_id)  # else 503: down, moving, elsewhere
        await self.proxy.serve_local(method, raw_headers, body, principal, receive, send)
