"""What every ``/api/v1`` operation promises, in one place: its error replies as the OpenAPI
document declares them, and the one rule for what it was not asked to take.

The rule (``gw:rest``): a query parameter the document does not declare for the operation, one given
twice, or a field its JSON body does not declare is refused with ``400 invalid_input`` naming it and
what the operation takes; nothing is done. Query parameters are checked against the document itself
(:func:`path_route`), before the token, so an operation cannot take one its document does not show.
A method the path does not serve is ``405 method_not_allowed`` with ``Allow`` listing those it does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import Receive, Scope, Send

from gateway.errors import MethodNotAllowed

from .guard import guarded

Endpoint = Callable[[Request], Awaitable[Response]]

ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "fields": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "a settings change: each refused setting and what to fix",
                },
            },
        }
    },
}

#: Every status an operation may answer with besides its success, and what it means.
STATUSES: dict[int, str] = {
    400: "Refused: the message says what to fix (an unknown query parameter or body field is named); "
    "nothing was changed",
    401: "No usable bearer token (see WWW-Authenticate)",
    403: "This connection may not do that (read-only, pinned to a scope), or this host is not served",
    404: "Nothing with that id (or not visible to this connection)",
    409: "Not in a state that allows it (a memory that is not retired, or whose file is kept as it is)",
    410: "The workspace's node was declared lost: the owner restores it from a backup",
    413: "The request body is too large",
    429: "Too many requests on this connection; see Retry-After",
    503: "The workspace cannot be served right now; see Retry-After",
}

#: What every operation may answer: bad input, no token, not allowed, too many, unavailable.
ALWAYS = (400, 401, 403, 429, 503)


def error_responses(*statuses: int) -> dict[str, Any]:
    """The OpenAPI ``responses`` entries of these error statuses (and of :data:`ALWAYS`)."""
    return {
        str(status): {
            "description": STATUSES[status],
            "content": {"application/json": {"schema": ERROR}},
        }
        for status in sorted({*ALWAYS, *statuses})
    }


def invalid(message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": "invalid_input", "message": message}}, status_code=400)


def _takes(allowed: Collection[str]) -> str:
    return ", ".join(sorted(allowed)) or "none"


def unknown_query(pairs: list[tuple[str, str]], allowed: Collection[str]) -> str | None:
    """Why this query is refused (a parameter not ``allowed``, or given twice), or None."""
    seen: set[str] = set()
    for name, _ in pairs:
        if name not in allowed:
            return f"unknown query parameter {name!r}; this operation takes: {_takes(allowed)}"
        if name in seen:
            return f"query parameter {name!r} is given twice"
        seen.add(name)
    return None


def unknown_fields(data: Mapping[str, Any], allowed: Collection[str]) -> str | None:
    """Why this JSON body is refused (fields not ``allowed``), or None."""
    unknown = sorted(set(data) - set(allowed))
    if not unknown:
        return None
    return f"unknown field(s) {', '.join(unknown)}; this operation takes: {_takes(allowed)}"


def path_route(path: str, handlers: Mapping[str, tuple[Endpoint, Collection[str]]]) -> Route:
    """One route for every method served at ``path``: method → (endpoint, its query parameters).
    HEAD is served as GET; any other method is 405 with ``Allow``."""
    allow = tuple(sorted({*handlers, *(("HEAD",) if "GET" in handlers else ())}))

    async def endpoint(request: Request) -> Response:
        found = handlers.get("GET" if request.method == "HEAD" else request.method)
        if found is None:
            raise MethodNotAllowed(f"{path} accepts {', '.join(allow)}", allow=allow)
        call, query = found
        problem = unknown_query(list(request.query_params.multi_items()), query)
        if problem is not None:
            return invalid(problem)
        return await call(request)

    return Route(path, _EveryMethod(guarded(endpoint)), methods=None)


class _EveryMethod:
    """An endpoint as an ASGI app: Starlette routes every method to it (given a plain function, a
    route would answer only GET and HEAD itself, with a text 405)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.app = request_response(endpoint)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def query_parameters(document: Mapping[str, Any]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(path, METHOD) → the query parameters the document declares for that operation."""
    return {
        (path, method.upper()): tuple(p["name"] for p in spec.get("parameters", []) if p["in"] == "query")
        for path, operations in document["paths"].items()
        for method, spec in operations.items()
    }
