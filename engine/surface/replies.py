"""How ``/mcp`` on the engine's socket answers: one JSON body when nothing can stream.

The SDK answers a 2026-07-28 request in one of two ways. In SSE mode it runs the handler as a
separate task beside a disconnect watcher and a memory stream, and commits to ``text/event-stream``
as soon as the handler sends a notification; in JSON mode it awaits the handler and writes one
``application/json`` body. A request that asks for no progress (no ``progressToken`` in its
``_meta``) and no log notifications (no log level in its ``_meta``) and is not a
``subscriptions/listen`` can receive no notification on this wire, so SSE mode would answer it with
the same JSON body, only later (the task group, stream and cancel cost more than the rest of the
transport). Such a request goes to a session manager in JSON mode; everything else — 2025-era
sessions, GET streams, requests that asked for progress or logs, bodies this module cannot read
cheaply — goes to the streaming one, unchanged (``docs/wire.md``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from engine.surface import sdk
from engine.surface.lean import Lean, Reply

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: What :func:`decoded` returns for a body that is not JSON.
NOT_JSON = object()
#: Requests whose reply is a stream of notifications by definition.
STREAMING_METHODS = frozenset({"subscriptions/listen"})


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def peekable(scope: Scope, limit: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> bool:
    """A 2026-07-28 POST with a declared body small enough to read before choosing."""
    if scope.get("method") != "POST":
        return False
    version = header(scope, b"mcp-protocol-version")
    if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
        return False  # a 2025-era session (or its opening request): the streaming manager owns it
    length = header(scope, b"content-length")
    return length is not None and length.isdigit() and int(length) <= limit


def decoded(body: bytes) -> object:
    """The JSON in ``body`` (parsed once, for every check that reads it), or :data:`NOT_JSON`."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return NOT_JSON


def answers_at_once(message: object) -> bool:
    """Whether the request ``message`` (a decoded body) can receive no notification, so one JSON
    reply says it all.

    Anything this cannot tell (not JSON, not one request, odd ``_meta``) is False: the streaming
    manager then answers exactly as before, errors included."""
    if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("method"), str):
        return False
    if message["method"] in STREAMING_METHODS:
        return False
    params = message.get("params", {})
    if params is None:
        return True
    if not isinstance(params, Mapping):
        return False
    meta = params.get("_meta", {})
    if meta is None:
        return True
    if not isinstance(meta, Mapping):
        return False
    return "progressToken" not in meta and LOG_LEVEL_META_KEY not in meta


async def read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The whole request body, or what arrived before the client left (and that message)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(bytes(message.get("body", b"")))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def replay(body: bytes, last: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that hands over ``body`` again, then whatever the client sends next."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": last is not None}]
    if last is not None:
        pending.append(last)

    async def again() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return again


class Replies:
    """The ASGI endpoint for ``/mcp``: JSON mode when nothing can stream, SSE mode otherwise; a
    plain request in JSON mode is answered by ``lean`` when given (``engine.surface.lean``)."""

    def __init__(
        self,
        streaming: StreamableHTTPSessionManager,
        single: StreamableHTTPSessionManager,
        lean: Lean | None = None,
    ) -> None:
        self.streaming = streaming
        self.single = single
        self.lean = lean

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not peekable(scope):
            await self.streaming.handle_request(scope, receive, send)
            return
        body, last = await read_body(receive)
        again = replay(body, last, receive)
        message = decoded(body) if last is None else NOT_JSON
        if not answers_at_once(message):
            await self.streaming.handle_request(scope, again, send)
            return
        # The JSON-mode manager's lifespan state (entered once, in its run()) is what its entry
        # hands the handlers; the lean answer hands them the same.
        state = sdk.lifespan_state(self.single)
        if self.lean is not None and await self.lean.answer(scope, message, state, again, send):
            return
        await self.single.handle_request(scope, again, send)

    async def at_once(self, scope: Scope, body: bytes) -> Callable[[], Reply] | None:
        """What :meth:`__call__` would write for a plain ``tools/call`` of one of the engine's own
        tools (``body`` the whole request body), as work for a tool thread that gives its status
        and body (``engine.surface.lean.Lean.direct_job``); None for anything else, before
        anything has run (``engine.surface.protocol`` then hands the request to the app)."""
        if self.lean is None or not peekable(scope):
            return None
        message = decoded(body)
        if not answers_at_once(message):
            return None
        return await self.lean.direct_job(scope, message, sdk.lifespan_state(self.single))
