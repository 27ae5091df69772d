"""The owner node's side of a forwarded call: ``/internal/v1/mcp`` (issue 15, ``run:scale-out``).

Only other nodes call it. A request must carry a principal and a valid HMAC signature made with the
cluster secret for this node, this path, this body and a timestamp within the window; anything else
is refused with 401 ``cluster_signature_invalid`` before anything is read from the control plane or
started. A client's bearer token means nothing here (it is not even looked at). A signed call is
served only while this node holds the workspace's lease; it is never forwarded again (no loops):
otherwise it gets 503 + Retry-After, and the edge node passes that on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.cluster.forward import ClusterLink
from gateway.edge.proxy import METHODS, ClientGone, McpProxy, Message, Receive, Scope, Send, send_error
from gateway.errors import GatewayError, MethodNotAllowed


class InternalMcp:
    def __init__(self, proxy: McpProxy, link: ClusterLink, *, clock: Callable[[], float] = time.time) -> None:
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
