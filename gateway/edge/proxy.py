"""``/mcp``: authenticate, then stream to the workspace's engine over its Unix socket (``gw:route``).

A pure ASGI app (no ``BaseHTTPMiddleware``: it would buffer SSE). In order: method, ``Host``,
``Origin``, bearer token, rate limit, body cap; only then is an engine leased (started if need be)
and the request forwarded. Responses stream back chunk by chunk with no read timeout; a client
that goes away, before or after the response headers, cancels the upstream request.

A 2025-era session outlives the engine process that opened it: the gateway keeps what opened it and
opens it again on the next engine (:mod:`gateway.edge.sessions`). GET and DELETE never wake a
sleeping engine: a GET of a kept session then gets 405 (no stream until a POST wakes the workspace),
a DELETE ends it here; a session not known here gets 404 (the client then starts a new one with a
POST). A session is honoured only for the connection that opened it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import anyio
import httpx
from starlette.types import Message, Receive, Scope, Send

from gateway import headers as hdr
from gateway import logs
from gateway.asgi import ClientGone, off_loop, read_all, send_error
from gateway.auth.tokens import parse_bearer
from gateway.cluster.forward import (
    METHODS,
    ClusterLink,
    refused_between_nodes,
    unreachable,
    via_client,
)
from gateway.cluster.placement import Forward, Unavailable
from gateway.cluster.router import unavailable
from gateway.control.clock import iso
from gateway.control.records import Principal
from gateway.control.store import ControlPlane
from gateway.edge.principals import PrincipalCache
from gateway.edge.sessions import (
    ReopenFailed,
    Session,
    Sessions,
    is_request,
    kept,
    reopen,
    to_client,
    to_engine,
)
from gateway.engines.supervisor import ENGINE_TIMEOUT, Lease
from gateway.engines.wire import EngineBody, EngineCall, EngineTransport
from gateway.errors import (
    ControlPlaneUnavailable,
    EngineUnreachable,
    GatewayError,
    HostNotAllowed,
    MethodNotAllowed,
    OriginNotAllowed,
    PayloadTooLarge,
    RateLimited,
    SessionNotFound,
    Unauthorized,
    WorkspaceUnavailable,
)
from gateway.metrics import Metrics
from gateway.ratelimit import RateLimiter


class Outgoing(Protocol):
    """What the relay needs of a request besides sending it: an ``httpx.Request`` or an
    :class:`~gateway.engines.wire.EngineCall`."""

    @property
    def method(self) -> str: ...

    @property
    def url(self) -> httpx.URL | str: ...


R = TypeVar("R", bound=Outgoing)

ENGINE_MCP_URL = "http://localhost/mcp"
_ENGINE_URL = httpx.URL(ENGINE_MCP_URL)  # parsed once: parsing it per call cost 50 µs
_ENGINE_TIMEOUTS = ENGINE_TIMEOUT.as_dict()
_ENGINE_EXTENSIONS = {"timeout": _ENGINE_TIMEOUTS}
_ENGINE_TARGET = _ENGINE_URL.raw_path
_WITH_LENGTH = frozenset({"POST", "PUT", "PATCH"})
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"
SCOPE = "memory"
_TOUCH_EVERY = 60.0
#: Replies of known length up to this size are passed on in one piece (:func:`whole`).
ONE_PIECE = 1024 * 1024


def missing_token_message(header: str | None, base: str) -> str:
    """What a client without a usable bearer token is told: the two ways in."""
    ways = (
        f"Two ways in: add {base}/mcp to an MCP client that signs in (it opens a browser page here "
        "to sign in and approve the connection), or create a personal access token (sign in at "
        f"{base}/ or run `almanac token create --owner EMAIL --name NAME`) and send it as "
        "'Authorization: Bearer <token>'."
    )
    if header is None or not header.strip():
        return "this endpoint needs a bearer token. " + ways
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() == "bearer":
        return "the Authorization header says 'Bearer' but carries no token after it. " + ways
    if not rest.strip():  # one word: a token sent without the scheme
        return (
            "the Authorization header must be 'Bearer <token>': put the word 'Bearer' and a space "
            "before the token. " + ways
        )
    return f"the Authorization header uses the {scheme!r} scheme; only 'Bearer <token>' is accepted. " + ways


class Engines(Protocol):
    """What the proxy needs from the supervisor (tests pass an engine over a mock transport)."""

    def is_running(self, workspace_id: str) -> bool: ...

    def lease(
        self, workspace_id: str, *, counts_as_use: bool = True
    ) -> AbstractAsyncContextManager[Lease]: ...


class _Watch:
    """Watches for the client leaving while a reply is relayed, and cancels ``task`` if it does
    before the reply's last message went out (after that uvicorn's ``receive`` says
    ``http.disconnect`` at once, which means nothing)."""

    def __init__(self, receive: Receive, task: asyncio.Task[Any]) -> None:
        self.receive, self.task = receive, task
        self.done = False  # the reply's last message went out
        self.cancelled = False  # this watch cancelled the task

    async def run(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass
        if not self.done:
            self.cancelled = True
            self.task.cancel()

    def send(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.done = True

        return sending


class _UnknownSession(Exception):
    """The engine answered 404 to a request of a kept session: it no longer holds the session."""


@dataclass
class _Exchange:
    """What one request has done so far (for metrics and error handling)."""

    status: int = 0
    started: bool = False


def engine_request(method: str, headers: hdr.RawHeaders, body: bytes) -> httpx.Request:
    """The request for this node's engine: what ``httpx.Request(method, ENGINE_MCP_URL,
    headers=headers, content=body or None)`` builds (a ``Content-Length`` for a body, and for a
    POST without one), at a third of its cost — the URL parsed once, the body not re-encoded."""
    if body or method in _WITH_LENGTH:
        headers = [*headers, (b"content-length", str(len(body)).encode("ascii"))]
    request = httpx.Request(
        method, _ENGINE_URL, headers=headers, stream=httpx.ByteStream(body), extensions=_ENGINE_EXTENSIONS
    )
    request.read()  # the body is known: the engine's transport sends it with the head, in one write
    return request


def engine_call(method: str, headers: hdr.RawHeaders, body: bytes) -> EngineCall:
    """The same request as :func:`engine_request` — the same bytes on the wire — for the engine
    transport's :meth:`~gateway.engines.wire.EngineTransport.send_call`, no ``httpx.Request`` built."""
    if body or method in _WITH_LENGTH:
        headers = [*headers, (b"content-length", str(len(body)).encode("ascii"))]
    return EngineCall(method, _ENGINE_TARGET, ENGINE_MCP_URL, headers, body, _ENGINE_TIMEOUTS)


def body_of(upstream: httpx.Response) -> httpx.AsyncByteStream:
    """A reply's raw body stream, read without ``aiter_raw``'s wrappers (the transports already
    raise httpx's errors)."""
    stream = upstream.stream
    assert isinstance(stream, httpx.AsyncByteStream)
    return stream


async def read_whole(upstream: httpx.Response) -> bytes:
    """A reply's whole raw body (the engine transport's body reads it without an async generator)."""
    stream = body_of(upstream)
    if isinstance(stream, EngineBody):
        return await stream.read()
    return b"".join([chunk async for chunk in stream])


async def close_reply(upstream: httpx.Response) -> None:
    """Close a reply, even while the call is being cancelled. The engine transport's replies close
    without waiting (nothing can interrupt them, ``tests/gateway/engines/test_wire.py``), so only
    other replies need the cancel shield (an anyio shield costs about 10 µs per call)."""
    if isinstance(upstream.stream, EngineBody):
        await upstream.aclose()
        return
    with anyio.CancelScope(shield=True):
        await upstream.aclose()


def whole(request: Outgoing, upstream: httpx.Response) -> bool:
    """A reply of known length up to :data:`ONE_PIECE` bytes (a JSON reply, not an SSE stream) is
    read whole and passed on in one piece with its length: the client gets the head and the body
    in two writes, not three (head, chunk, end of chunks)."""
    if request.method == "HEAD" or upstream.status_code < 200 or upstream.status_code in (204, 304):
        return False
    declared = hdr.get(upstream.headers.raw, b"content-length")
    return declared is not None and declared.isdigit() and int(declared) <= ONE_PIECE


class McpProxy:
    def __init__(
        self,
        *,
        store: ControlPlane,
        supervisor: Engines,
        origin_policy: hdr.OriginPolicy,
        limiter: RateLimiter,
        metrics: Metrics,
        max_body_bytes: int,
        retry_after: float,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        principals: PrincipalCache | None = None,
        cluster: ClusterLink | None = None,
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.supervisor = supervisor
        self.origin_policy = origin_policy
        self.limiter = limiter
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.retry_after = retry_after
        self.clock = clock
        self.wall_clock = wall_clock
        if principals is None:
            principals = PrincipalCache(
                lambda secret, now: store.connections.authenticate(secret, now=iso(now)), clock=wall_clock
            )
        self.principals = principals
        #: 2025-era sessions, kept so that they outlive the engine process serving them
        self.sessions = Sessions()
        self._touched: dict[str, float] = {}
        self._log = logs.get()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - mounted for HTTP only
            return
        began, method = self.clock(), str(scope["method"])
        exchange = _Exchange()

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status, exchange.started = int(message["status"]), True
                self.metrics.latency.labels(method).observe(self.clock() - began)
            await send(message)

        try:
            await self._handle(scope, receive, tracked_send)
        except ClientGone:
            pass
        except GatewayError as exc:
            self._count_refusal(exc)
            if exchange.started:
                raise
            await send_error(tracked_send, exc)
        finally:
            self.metrics.requests.labels(method, str(exchange.status or 499)).inc()

    def _count_refusal(self, exc: GatewayError) -> None:
        if isinstance(exc, WorkspaceUnavailable):
            self.metrics.unavailable.labels(exc.code).inc()
        elif isinstance(exc, RateLimited):
            self.metrics.rate_limited.inc()
        elif exc.status in (401, 403):
            self.metrics.auth_failures.labels(exc.code).inc()

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, raw_headers = str(scope["method"]), list(scope["headers"])
        remote = scope["client"][0] if scope.get("client") else None
        if method not in METHODS:
            raise MethodNotAllowed(f"/mcp accepts {', '.join(METHODS)}", allow=METHODS)
        host = hdr.get(raw_headers, b"host")
        if not hdr.host_allowed(self.origin_policy, host):
            raise HostNotAllowed(f"host {host!r} is not served here")
        base = hdr.base_url(self.origin_policy, str(scope.get("scheme", "http")), host)
        origin = hdr.get(raw_headers, b"origin")
        if not hdr.origin_allowed(self.origin_policy, origin, base):
            await off_loop(
                self.store.audit_log.record, "origin.denied", remote=remote, detail={"origin": origin}
            )
            raise OriginNotAllowed(f"origin {origin!r} may not call this server")
        principal = await self.authenticate(raw_headers, base, remote)
        decision = self.limiter.check(principal.connection_id, self.clock())
        if not decision.allowed:
            raise RateLimited(
                "too many requests on this connection; slow down", retry_after=decision.retry_after
            )
        body = await self.read_body(raw_headers, receive) if method == "POST" else b""
        await self.touch(principal.connection_id)

        await self.dispatch(method, raw_headers, body, principal, receive, send)

    async def dispatch(
        self,
        method: str,
        raw_headers: hdr.RawHeaders,
        body: bytes,
        principal: Principal,
        receive: Receive,
        send: Send,
    ) -> None:
        """An authenticated call: served here, or (node mode) forwarded to the workspace's node, or
        refused with 503 + Retry-After while that node cannot serve it."""
        if self.cluster is not None:
            where = await self.cluster.router.route(principal.workspace_id)
            if isinstance(where, Forward):
                request = self.cluster.forwarder.request(where, method, raw_headers, body, principal)
                await self.stream(
                    via_client(self.cluster.forwarder.client),
                    request,
                    principal,
                    receive,
                    send,
                    on_response=refused_between_nodes,
                    unreachable=unreachable(where, self.retry_after, self.cluster.forwarder.timeout),
                )
                return
            if isinstance(where, Unavailable):
                raise unavailable(where)
        await self.serve_local(method, raw_headers, body, principal, receive, send)

    async def serve_local(
        self,
        method: str,
        raw_headers: hdr.RawHeaders,
        body: bytes,
        principal: Principal,
        receive: Receive,
        send: Send,
    ) -> None:
        """Hand the call to this node's engine for the workspace (started if need be); a kept
        2025-era session is opened again on that engine first if it does not hold it."""
        session_id = hdr.get(raw_headers, b"mcp-session-id")
        workspace_id = principal.workspace_id
        session = self.sessions.get(workspace_id, session_id) if session_id else None
        if session is not None and session.connection_id != principal.connection_id:
            raise SessionNotFound("no such session for this connection; start a new one")
        if method != "POST" and not self.supervisor.is_running(workspace_id):
            await self._asleep(method, workspace_id, session_id, session, send)
            return
        async with self.supervisor.lease(workspace_id, counts_as_use=method != "GET") as lease:
            if session is None or not session.resumable:
                await self._forward(
                    lease, method, raw_headers, body, principal, session_id, None, receive, send
                )
                return
            for last in (False, True):
                if session.generation != lease.slot.generation:
                    await self._reopen(lease, session, raw_headers, principal)
                try:
                    await self._forward(
                        lease, method, raw_headers, body, principal, session_id, session, receive, send, last
                    )
                    return
                except _UnknownSession:  # refused before it ran: open the session again, then resend
                    session.generation = -1

    async def _asleep(
        self, method: str, workspace_id: str, session_id: str | None, session: Session | None, send: Send
    ) -> None:
        """A GET or DELETE while the workspace's engine sleeps (neither wakes it)."""
        if session_id is None:
            raise MethodNotAllowed("no stream to offer: start with a POST", allow=("POST",))
        if session is None or not session.resumable:
            raise SessionNotFound(
                "no such session here (it ended, or the gateway restarted); start a new one"
            )
        if method == "DELETE":
            self.sessions.ended(workspace_id, session_id)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        raise MethodNotAllowed(
            "the workspace is asleep: no stream to offer until the session's next POST wakes it "
            "(the session is kept)",
            allow=("POST", "DELETE"),
        )

    async def _reopen(
        self, lease: Lease, session: Session, raw_headers: hdr.RawHeaders, principal: Principal
    ) -> None:
        """Open ``session`` again on the lease's engine (once, whatever other requests of the same
        session arrive meanwhile); 503 if the engine will not take it back (the session is kept)."""
        async with session.lock:
            generation = lease.slot.generation
            if session.generation == generation:
                return
            base = [(b"host", b"localhost"), *hdr.identity(principal)]
            version = hdr.get(raw_headers, b"mcp-protocol-version")
            try:
                await reopen(
                    lease.transport.handle_async_request,
                    partial(engine_request, "POST"),
                    session,
                    base,
                    version,
                    generation,
                )
            except (httpx.TransportError, ReopenFailed) as exc:
                logs.event(
                    self._log,
                    logging.WARNING,
                    "session.reopen_failed",
                    workspace=principal.workspace_id,
                    error=repr(exc),
                )
                raise EngineUnreachable(
                    "the workspace's engine could not take this session back; try again",
                    retry_after=self.retry_after,
                ) from exc
        self.metrics.sessions_reopened.inc()
        logs.event(self._log, logging.INFO, "session.reopened", workspace=principal.workspace_id)

    async def _forward(
        self,
        lease: Lease,
        method: str,
        raw_headers: hdr.RawHeaders,
        body: bytes,
        principal: Principal,
        session_id: str | None,
        session: Session | None,
        receive: Receive,
        send: Send,
        last: bool = True,
    ) -> None:
        """Send the call to the lease's engine and stream its answer back. ``session``: the kept
        session it belongs to (its id rewritten both ways when the engine knows it by another);
        unless ``last``, an engine that no longer knows it raises :class:`_UnknownSession` before
        anything is answered."""
        headers = hdr.upstream_request(raw_headers, principal)
        response_headers: Callable[[hdr.RawHeaders], hdr.RawHeaders] = hdr.downstream_response
        if session is not None and session_id is not None and session.engine_id != session_id:
            headers = to_engine(headers, session)
            response_headers = to_client(session_id, session)

        def on_response(upstream: httpx.Response) -> None:
            self._track_session(lease, method, upstream, principal, session_id, session, body, last)

        def unreachable() -> GatewayError:
            return EngineUnreachable(
                "the workspace's engine went away; try again", retry_after=self.retry_after
            )

        transport = lease.transport
        if isinstance(transport, EngineTransport):  # this node's engines: no httpx.Request built
            call = engine_call(method, headers, body)
            await self.stream(
                transport.send_call,
                call,
                principal,
                receive,
                send,
                on_response=on_response,
                unreachable=unreachable,
                response_headers=response_headers,
            )
            return
        request = engine_request(method, headers, body)
        await self.stream(
            transport.handle_async_request,
            request,
            principal,
            receive,
            send,
            on_response=on_response,
            unreachable=unreachable,
            response_headers=response_headers,
        )

    async def authenticate(self, raw_headers: hdr.RawHeaders, base: str, remote: str | None) -> Principal:
        """The principal of a request's bearer token, or :class:`Unauthorized` (REST uses it too).
        An OAuth token must have been issued for this gateway's ``/mcp`` resource (RFC 8707).
        The control plane is asked off the event loop, and its answer reused for a moment
        (:class:`~gateway.edge.principals.PrincipalCache`)."""
        metadata, resource = base + RESOURCE_METADATA_PATH, base + "/mcp"
        header = hdr.get(raw_headers, b"authorization")
        token = parse_bearer(header)
        if token is None:
            raise Unauthorized(missing_token_message(header, base), resource_metadata=metadata, scope=SCOPE)
        principal = await self.principals.principal(token)
        if principal is None:
            await off_loop(
                self.store.audit_log.record,
                "auth.denied",
                remote=remote,
                detail={"reason": "unknown, expired or revoked token", "prefix": token[:16]},
            )
            raise Unauthorized(
                "the bearer token is unknown, expired or revoked; sign in again or create a new token",
                resource_metadata=metadata,
                error="invalid_token",
                scope=SCOPE,
            )
        if principal.resource is not None and principal.resource != resource:
            await off_loop(
                self.store.audit_log.record,
                "auth.denied",
                owner_id=principal.owner_id,
                workspace_id=principal.workspace_id,
                connection_id=principal.connection_id,
                remote=remote,
                detail={
                    "reason": "token audience mismatch",
                    "audience": principal.resource,
                    "resource": resource,
                },
            )
            raise Unauthorized(
                f"this token was issued for {principal.resource}, not {resource}",
                resource_metadata=metadata,
                error="invalid_token",
                scope=SCOPE,
            )
        return principal

    async def read_body(self, raw_headers: hdr.RawHeaders, receive: Receive) -> bytes:
        declared = hdr.get(raw_headers, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise PayloadTooLarge(f"request bodies are limited to {self.max_body_bytes} bytes")
        return await read_all(receive, self.max_body_bytes)

    async def touch(self, connection_id: str) -> None:
        """Record the connection's last use — at most once a minute, off the event loop (REST
        calls record theirs here too, so both count alike); skipped while the control plane is
        unreachable (the next call records it)."""
        now = self.clock()
        if now - self._touched.get(connection_id, float("-inf")) >= _TOUCH_EVERY:
            self._touched[connection_id] = now
            try:
                await off_loop(self.store.connections.touch, connection_id)
            except ControlPlaneUnavailable:  # a call served from what this node knows: noted later
                self._touched.pop(connection_id, None)

    async def stream(
        self,
        upstream: Callable[[R], Awaitable[httpx.Response]],
        request: R,
        principal: Principal,
        receive: Receive,
        send: Send,
        *,
        on_response: Callable[[httpx.Response], None],
        unreachable: Callable[[], GatewayError],
        response_headers: Callable[[hdr.RawHeaders], hdr.RawHeaders] = hdr.downstream_response,
    ) -> None:
        """Send ``request`` through ``upstream`` (a client's send or a transport's, see
        :func:`~gateway.cluster.forward.via_client`) and stream its answer back; a client that goes
        away cancels it.

        The watch for the client leaving is one plain task that cancels this one (an anyio task
        group cost about a tenth of the gateway's CPU per call, ``perf:gateway``); it stops
        watching once the reply is out, so only a client leaving before that cancels anything."""
        task = asyncio.current_task()
        assert task is not None
        watch = _Watch(receive, task)
        watcher = asyncio.get_running_loop().create_task(watch.run())
        try:
            await self._relay(
                upstream, request, principal, watch.send(send), on_response, unreachable, response_headers
            )
        except asyncio.CancelledError:
            if watch.cancelled and task.uncancel() == 0:
                return  # the client went away (and nothing else cancels this call): nobody to answer
            raise
        finally:
            watcher.cancel()

    async def _relay(
        self,
        upstream_send: Callable[[R], Awaitable[httpx.Response]],
        request: R,
        principal: Principal,
        send: Send,
        on_response: Callable[[httpx.Response], None],
        unreachable: Callable[[], GatewayError],
        response_headers: Callable[[hdr.RawHeaders], hdr.RawHeaders],
    ) -> None:
        try:
            upstream = await upstream_send(request)
        except httpx.TransportError as exc:
            self._gone(principal, request, exc)
            raise unreachable() from exc
        try:
            on_response(upstream)
            headers = response_headers(list(upstream.headers.raw))
            start: Message = {"type": "http.response.start", "status": upstream.status_code}
            if whole(request, upstream):
                try:
                    body = await read_whole(upstream)
                except httpx.TransportError as exc:  # nothing sent yet: the engine is unreachable
                    self._gone(principal, request, exc)
                    raise unreachable() from exc
                length = (b"content-length", str(len(body)).encode("ascii"))
                start["headers"] = [(k, v) for k, v in headers if k != b"content-length"] + [length]
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            start["headers"] = headers
            await send(start)
            try:
                async for chunk in body_of(upstream):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.TransportError as exc:
                logs.event(
                    self._log,
                    logging.WARNING,
                    "engine.stream_broken",
                    workspace=principal.workspace_id,
                    upstream=str(request.url),
                    error=repr(exc),
                )
            except OSError:  # the client went away mid-stream
                return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await close_reply(upstream)

    def _gone(self, principal: Principal, request: Outgoing, exc: Exception) -> None:
        logs.event(
            self._log,
            logging.WARNING,
            "engine.unreachable",
            workspace=principal.workspace_id,
            upstream=str(request.url),
            error=repr(exc),
        )

    def _track_session(
        self,
        lease: Lease,
        method: str,
        upstream: httpx.Response,
        principal: Principal,
        session_id: str | None,
        session: Session | None,
        body: bytes,
        last: bool,
    ) -> None:
        """Keep a session the engine just opened (with its ``initialize``, to open it again on a
        later engine), its log level, and forget one the client ended or the engine lost."""
        workspace_id = principal.workspace_id
        if session_id is None:
            new_id = hdr.get(upstream.headers.raw, b"mcp-session-id")
            if new_id and method == "POST" and upstream.is_success:
                opening = kept(body) if is_request(body, "initialize") else None
                opened = Session(principal.connection_id, new_id, lease.slot.generation, opening)
                self.sessions.opened(workspace_id, new_id, opened)
            return
        if method == "DELETE" and upstream.is_success:
            self.sessions.ended(workspace_id, session_id)
        elif session is None:
            return
        elif upstream.status_code == 404:
            if not last:
                raise _UnknownSession
            self.sessions.ended(workspace_id, session_id)
        elif method == "POST" and upstream.is_success and is_request(body, "logging/setLevel"):
            session.level = kept(body)
