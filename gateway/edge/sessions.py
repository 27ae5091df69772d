"""2025-era MCP sessions that outlive the engine process serving them (``gw:route``, ``gw:spawn``).

A 2025-era client opens a session with ``initialize`` and sends its ``Mcp-Session-Id`` on every
request after; the session lives in the engine process that answered. That process does not live as
long as the client: the gateway stops an idle engine (``engine_idle_timeout``), stops one to make
room under ``max_engines``, restarts one for new settings, and a crashed one is started afresh. A
client that kept its session would then be told "Session not found" (the official ``mcp`` client
does not open a new session on that 404: the call fails). The client has no way to avoid a 2025-era
session either: the SDK's ``mode="auto"`` falls back to one whenever its ``server/discover`` probe
fails or times out (10 s), as it does while a workspace waits its turn to start.

So the gateway keeps what opened each session — its ``initialize`` request, and the last
``logging/setLevel`` it sent — and when a request of the session finds the workspace served by
another engine process than the one that opened it (or the engine says it no longer knows the
session), the gateway opens the session again on that engine first (``initialize``,
``notifications/initialized``, then ``logging/setLevel`` if there was one), and sends the request
under the engine's new session id. The client keeps its own id throughout: requests are rewritten
to the engine's id, replies back to the client's. Nothing of a request is sent twice: a request is
sent again only after the engine refused it as of an unknown session, before running it.

Kept per workspace, at most :data:`MAX_SESSIONS` (the least recently used are forgotten first, and a
forgotten session ends with its engine, as every session did before); an ``initialize`` or
``logging/setLevel`` larger than :data:`MAX_KEPT_BODY` is not kept (such a session is not reopened).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import httpx

from gateway import headers as hdr

#: Sessions remembered per workspace (the least recently used are forgotten first).
MAX_SESSIONS = 10_000
#: A kept ``initialize`` or ``logging/setLevel`` request is at most this long (real ones: < 1 KiB);
#: two per session and :data:`MAX_SESSIONS` per workspace bound what one workspace keeps to 80 MiB.
MAX_KEPT_BODY = 4 * 1024
#: What a reopened session is told once its ``initialize`` is answered.
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
_ACCEPT = b"application/json, text/event-stream"

Send = Callable[[httpx.Request], Awaitable[httpx.Response]]


class ReopenFailed(Exception):
    """The engine would not take a session back (what it answered is in the message)."""


@dataclass(eq=False)
class Session:
    """One 2025-era session of a workspace, under the id its client knows."""

    connection_id: str
    #: the session's id in the engine process serving it now, and that process's generation
    engine_id: str
    generation: int
    #: the ``initialize`` request that opened it (None: too long to keep; the session is not reopened)
    opening: bytes | None
    #: the last ``logging/setLevel`` request it sent, to send again on a reopen
    level: bytes | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    @property
    def resumable(self) -> bool:
        return self.opening is not None


def is_request(body: bytes, method: str) -> bool:
    """Whether ``body`` is one JSON-RPC request for ``method`` (a substring test first: almost every
    body is a tool call, and is not parsed here)."""
    if method.encode() not in body:
        return False
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == method and "id" in message


def kept(body: bytes) -> bytes | None:
    return body if len(body) <= MAX_KEPT_BODY else None


class Sessions:
    """The sessions of every workspace served here, by the id their clients know."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self._spaces: dict[str, OrderedDict[str, Session]] = {}

    def get(self, workspace_id: str, session_id: str) -> Session | None:
        space = self._spaces.get(workspace_id)
        found = space.get(session_id) if space is not None else None
        if found is not None:
            space.move_to_end(session_id)  # type: ignore[union-attr]
        return found

    def opened(self, workspace_id: str, session_id: str, session: Session) -> None:
        space = self._spaces.setdefault(workspace_id, OrderedDict())
        space[session_id] = session
        while len(space) > self.limit:
            space.popitem(last=False)

    def ended(self, workspace_id: str, session_id: str) -> None:
        space = self._spaces.get(workspace_id)
        if space is not None:
            space.pop(session_id, None)
            if not space:
                del self._spaces[workspace_id]

    def count(self, workspace_id: str) -> int:
        return len(self._spaces.get(workspace_id, ()))


def to_engine(headers: hdr.RawHeaders, session: Session) -> hdr.RawHeaders:
    """A request's upstream headers with the client's session id replaced by the engine's."""
    value = session.engine_id.encode("latin-1")
    return [(k, value) if k == b"mcp-session-id" else (k, v) for k, v in headers]


def to_client(client_id: str, session: Session) -> Callable[[hdr.RawHeaders], hdr.RawHeaders]:
    """The reply headers filter for a session known under another id at the engine."""
    engine_id, value = session.engine_id, client_id.encode("latin-1")

    def rewrite(headers: hdr.RawHeaders) -> hdr.RawHeaders:
        out = hdr.downstream_response(headers)
        return [
            (k, value) if k == b"mcp-session-id" and v.decode("latin-1") == engine_id else (k, v)
            for k, v in out
        ]

    return rewrite


async def reopen(
    send: Send,
    build: Callable[[hdr.RawHeaders, bytes], httpx.Request],
    session: Session,
    base: hdr.RawHeaders,
    version: str | None,
    generation: int,
) -> None:
    """Open ``session`` again on the engine behind ``send``: its ``initialize``, then
    ``notifications/initialized``, then its ``logging/setLevel`` if it sent one. ``base``: the
    headers every engine request carries (``Host``, the caller's identity); ``version``: the
    protocol version the client speaks on the session. Raises :class:`ReopenFailed` or httpx's
    transport errors; the session is changed only once all of it was answered."""
    assert session.opening is not None
    common = [(b"accept", _ACCEPT), (b"content-type", b"application/json"), *base]
    answer = await _exchange(send, build(common, session.opening))
    engine_id = hdr.get(answer.headers.raw, b"mcp-session-id")
    if answer.status_code != 200 or not engine_id:
        raise ReopenFailed(f"initialize answered {answer.status_code} without a session")
    inside = [*common, (b"mcp-session-id", engine_id.encode("latin-1"))]
    if version:
        inside.append((b"mcp-protocol-version", version.encode("latin-1")))
    answer = await _exchange(send, build(inside, INITIALIZED))
    if answer.status_code not in (200, 202):
        raise ReopenFailed(f"notifications/initialized answered {answer.status_code}")
    if session.level is not None:
        answer = await _exchange(send, build(inside, session.level))
        if answer.status_code != 200:
            raise ReopenFailed(f"logging/setLevel answered {answer.status_code}")
    session.engine_id, session.generation = engine_id, generation


async def _exchange(send: Send, request: httpx.Request) -> httpx.Response:
    response = await send(request)
    try:
        await response.aread()
    finally:
        await response.aclose()
    return response
