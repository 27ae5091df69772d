"""The engine's lean answer to the common request: one plain 2026-07-28 request, one JSON reply.

Most of what reaches ``/mcp`` is a stateless 2026-07-28 request that can receive no notification
(``engine.surface.replies``) and is in order: right headers, one JSON-RPC request, the envelope in
``_meta`` agreeing with the MCP headers. For such a request the SDK's JSON-mode entry builds a
Starlette request, re-reads and re-parses the body, validates the envelope with pydantic, walks the
tool's input schema for ``Mcp-Param`` headers, and wraps the reply in pydantic models and a
Starlette response, before and after the only part that matters: the SDK's own dispatch
(``serve_one``: the method's handler, argument validation, structured output, errors).

:func:`checked` runs the same checks as that entry, with the SDK's own functions where they are
cheap, on a body already parsed once; a request that passes them all is dispatched through
``serve_one`` exactly as the entry would, and its reply written as the entry writes it (same status,
``content-type``, and bytes). Anything that does not plainly pass — a bad Host or Origin, a wrong
Accept or Content-Type, malformed JSON, a mismatched header, ``Mcp-Param`` headers to check — is not
answered here: the caller hands it to the SDK, which answers it (and words its errors) as before.
The checks read the header lines once; the common case (a JSON Content-Type, a Host the settings
list exactly, no Origin, the Accept header MCP clients send) passes without the SDK's parsers, and
anything else is put to the SDK's own check functions.
``tests/engine/surface/test_lean_contract.py`` sends the same requests both ways to real engines
and compares the replies.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    x_mcp_header_map,
)
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError
from starlette.requests import Request
from starlette.responses import Response

from engine.surface import sdk
from engine.surface.direct import Direct

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
#: A reply written whole: its HTTP status and JSON body.
Reply = tuple[int, bytes]

_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()
#: The Accept header the MCP clients send; it plainly accepts JSON (anything else: the SDK's parser).
COMMON_ACCEPT = "application/json, text/event-stream"
_OK = 200


@dataclass(frozen=True)
class Plain:
    """A request that passed every check the SDK's entry makes: what dispatching it needs."""

    request_id: int | str
    method: str
    params: dict[str, Any] | None
    route: InboundModernRoute


class Lean:
    """Checks and answers plain requests for one server; :meth:`answer` returns False for the rest."""

    def __init__(
        self, server: Server[Any], security: TransportSecuritySettings, direct: Direct | None = None
    ) -> None:
        self.server = server
        self.direct = direct  # answers plain calls of the server's own tools (engine.surface.direct)
        self.security = TransportSecurityMiddleware(security)
        self._exact_hosts = frozenset(host for host in security.allowed_hosts if host)
        self._annotated: dict[str, tuple[object, bool]] = {}  # tool → (its schema, has Mcp-Param annotations)

    def _declares_params(self, tool: str) -> bool:
        """Whether ``tool``'s input schema declares ``Mcp-Param`` headers (which then need checking)."""
        lookup = self.server.get_tool_input_schema
        if lookup is None:
            return True  # the SDK's entry would list the tools to find the schema: let it
        try:
            schema = lookup(tool)
        except Exception:
            return True  # the SDK's entry logs this and carries on: let it

        known = self._annotated.get(tool)
        if known is None or known[0] is not schema:
            known = (schema, schema is not None and bool(x_mcp_header_map(schema)))
            self._annotated[tool] = known
        return known[1]

    def _plainly_allowed(self, first: Mapping[str, str]) -> bool:
        """Whether the SDK's Host/Origin/Content-Type check plainly passes: a JSON Content-Type, a
        Host it lists exactly, no Origin. Anything else is put to that check itself."""
        content_type = first.get("content-type")
        if content_type is None or not content_type.lower().startswith("application/json"):
            return False
        if not self.security.settings.enable_dns_rebinding_protection:
            return True
        return first.get("host", "") in self._exact_hosts and not first.get("origin")

    async def checked(
        self, request: Request, decoded: object, *, judge: bool = True
    ) -> Plain | Response | None:
        """The request (its body ``decoded``): :class:`Plain` if it passes every check the SDK's
        entry makes; the SDK's own refusal if its Host/Origin/Content-Type check (the entry's
        first) refuses it; None for anything else, which the SDK is to answer. With ``judge``
        False, a request that does not plainly pass that first check is None (not put to it)."""
        lines = header_lines(request.scope)
        first: dict[str, str] = {}
        for name, value in lines:
            first.setdefault(name, value)  # what Starlette's Headers.get and dict() read: the first
        if not self._plainly_allowed(first):
            if not judge:
                return None
            refused = await self.security.validate_request(request, is_post=True)
            if refused is not None:
                return refused
        if first.get("accept") != COMMON_ACCEPT:
            has_json, _ = check_accept_headers(request)
            if not has_json:
                return None
        if not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0":
            return None
        request_id, method, params = decoded.get("id"), decoded.get("method"), decoded.get("params")
        if not (type(request_id) is int or type(request_id) is str) or not isinstance(method, str):
            return None  # bool, float or null ids, and notifications, are the SDK's to judge
        if method == "subscriptions/listen" or not (params is None or isinstance(params, dict)):
            return None
        if find_duplicated_routing_header(lines) is not None:
            return None
        route = classify_inbound_request(decoded, headers=first)
        if not isinstance(route, InboundModernRoute):
            return None
        tool = params.get("name") if method == "tools/call" and params is not None else None
        if isinstance(tool, str) and (
            any(name.startswith(_PARAM_PREFIX) for name, _ in lines) or self._declares_params(tool)
        ):
            return None  # Mcp-Param headers to check against the tool's schema: the SDK does it
        return Plain(request_id, method, params, route)

    async def direct_job(
        self, scope: Scope, decoded: object, lifespan_state: Any
    ) -> Callable[[], Reply] | None:
        """The reply to a plain ``tools/call`` of one of the server's own tools, answered by
        ``direct`` (``engine.surface.direct``), as work for a tool thread: it runs the whole call
        there and gives what :meth:`answer` would write, as its status and body. None for any
        other request, before anything has run: :meth:`answer` (or the SDK) answers it as before."""
        if self.direct is None:
            return None
        request = Request(scope)
        plain = await self.checked(request, decoded, judge=False)
        if not isinstance(plain, Plain) or plain.method != "tools/call":
            return None
        direct, request_id = self.direct, plain.request_id
        try:
            prepared = direct.prepare(
                request_id, plain.params, plain.route.protocol_version, request, lifespan_state
            )
        except Exception as exc:
            return functools.partial(error_reply, request_id, exc)
        if prepared is None:
            return None

        def reply() -> Reply:
            try:
                result = direct.call_here(prepared)
            except Exception as exc:
                return error_reply(request_id, exc)
            return _OK, encoded({"jsonrpc": "2.0", "id": request_id, "result": result})

        return reply

    async def answer(
        self, scope: Scope, decoded: object, lifespan_state: Any, receive: Receive, send: Send
    ) -> bool:
        """Answer the request (its body ``decoded``) if it is plain, or refused by the SDK's Host/
        Origin/Content-Type check (True); False leaves it to the SDK, unanswered. ``receive`` hands
        the body over again (a handler may read the request)."""
        request = Request(scope, receive)
        plain = await self.checked(request, decoded)
        if plain is None:
            return False
        if isinstance(plain, Response):
            await plain(scope, receive, send)
            return True
        if self.direct is not None and plain.method == "tools/call":
            try:
                result = await self.direct.call(
                    plain.request_id, plain.params, plain.route.protocol_version, request, lifespan_state
                )
            except Exception as exc:
                await write_error(send, plain.request_id, exc)
                return True
            if result is not None:
                await write(send, _OK, {"jsonrpc": "2.0", "id": plain.request_id, "result": result})
                return True
        route = plain.route
        connection = Connection.from_envelope(
            route.protocol_version, route.client_info, route.client_capabilities
        )
        transport = TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers)
        dctx = sdk.single_exchange(
            transport,
            plain.request_id,
            ServerMessageMetadata(request_context=request),
            progress_token_from_params(plain.params),
        )
        try:
            result = await serve_one(
                self.server,
                dctx,
                plain.method,
                plain.params,
                connection=connection,
                lifespan_state=lifespan_state,
            )
        except Exception as exc:
            await write_error(send, plain.request_id, exc)
            return True
        await write(send, _OK, {"jsonrpc": "2.0", "id": plain.request_id, "result": result})
        return True


def header_lines(scope: Scope) -> list[tuple[str, str]]:
    """The request's header lines as Starlette's ``Headers.items()`` gives them (names lower-case)."""
    raw = scope["headers"]
    return [(bytes(name).decode("latin-1"), bytes(value).decode("latin-1")) for name, value in raw]


def error_reply(request_id: int | str, exc: Exception) -> Reply:
    """The JSON-RPC error the SDK's entry writes for what its dispatch raised: status and body."""
    error = JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
    reply = error.model_dump(mode="json", by_alias=True, exclude_none=True)
    return ERROR_CODE_HTTP_STATUS.get(error.error.code, _OK), encoded(reply)


def encoded(reply: Mapping[str, Any]) -> bytes:
    """One JSON body, serialised as the SDK's entry serialises it."""
    return json.dumps(reply, separators=(",", ":")).encode()


def reply_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of a JSON reply, in the order the SDK's entry writes them."""
    return [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]


async def write_error(send: Send, request_id: int | str, exc: Exception) -> None:
    """The JSON-RPC error the SDK's entry writes for what its dispatch raised."""
    await write_body(send, *error_reply(request_id, exc))


async def write(send: Send, status: int, reply: Mapping[str, Any]) -> None:
    """One JSON body, serialised and framed as the SDK's entry frames it."""
    await write_body(send, status, encoded(reply))


async def write_body(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": reply_headers(body)})
    await send({"type": "http.response.body", "body": body})
