"""``/api/v1``: the memory tools over plain HTTP (``gw:rest``).

The same bearer tokens as ``/mcp``, checked the same way (the proxy's authentication, so OAuth
audiences and revocation apply alike); the same per-connection rate limit and body cap; and the
call runs as the same tool on the same engine, so read-only connections, pinned scopes and every
refusal behave exactly as over MCP. A refusal is ``{"error": {"code", "message"}}`` with the
tool's own code. The owner's admin surface is mirrored under ``/api/v1/admin/…`` (:mod:`.admin`)
with the same authentication; a change there is refused to a read-only connection and audited.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway import headers as hdr
from gateway.api.contract import Endpoint, path_route, query_parameters, unknown_fields, unknown_query
from gateway.api.guard import guarded
from gateway.asgi import off_loop
from gateway.cluster.forward import FORWARDED_PRINCIPAL
from gateway.control.records import Principal
from gateway.control.store import ControlPlane
from gateway.edge.proxy import Engines
from gateway.engines.calls import ToolRefusal, call_tool
from gateway.errors import HostNotAllowed, PayloadTooLarge, RateLimited
from gateway.ratelimit import RateLimiter

from .admin import ADMIN_OPERATIONS, AdminOperation, query_of
from .openapi import OPERATIONS, PREFIX, REFUSAL_STATUS, Operation, argument_schemas, document
from .owner import OwnerApi
from .transfer import Restart, TransferApi

Authenticate = Callable[[hdr.RawHeaders, str, "str | None"], Awaitable[Principal]]
Audit = Callable[[str, Principal, "str | None", dict[str, object]], None]
Touch = Callable[[str], Awaitable[None]]


def refusal(code: str, message: str) -> JSONResponse:
    """A tool's refusal, in the gateway's one error envelope."""
    status = REFUSAL_STATUS.get(code, 400)
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def _query_value(name: str, raw: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if any(s.get("type") == "boolean" for s in schema.get("anyOf", [])) or kind == "boolean":
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"{name} must be true or false, not {raw!r}")
        return raw.lower() == "true"
    return raw


def arguments_from_query(op: Operation, query: list[tuple[str, str]]) -> dict[str, Any]:
    allowed = argument_schemas(op)
    problem = unknown_query(query, allowed)
    if problem is not None:
        raise ValueError(problem)
    return {name: _query_value(name, raw, allowed[name]) for name, raw in query}


def arguments_from_body(op: Operation, body: bytes) -> dict[str, Any]:
    if not body.strip():
        data: Any = {}
    else:
        try:
            data = json.loads(body)
        except ValueError:
            raise ValueError("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object")
    schemas = argument_schemas(op)
    problem = unknown_fields(data, schemas)
    if problem is not None:
        raise ValueError(problem)
    for name, value in data.items():
        kinds = [s["type"] for s in schemas[name].get("anyOf", [schemas[name]]) if "type" in s]
        if kinds and not any(_is_json(value, kind) for kind in kinds):
            raise WrongType(f"{name} must be {' or '.join(kinds)}, not {_json_kind(value)}")
    return data


class WrongType(ValueError):
    """A body field whose JSON type is not its schema's (never coerced: ``0`` is no boolean)."""


_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


def _is_json(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, _PYTHON_TYPES.get(kind, object))


def _json_kind(value: Any) -> str:
    return next((kind for kind in _PYTHON_TYPES if _is_json(value, kind)), type(value).__name__)


class RestApi:
    def __init__(
        self,
        *,
        authenticate: Authenticate,
        engines: Engines,
        origin_policy: hdr.OriginPolicy,
        limiter: RateLimiter,
        max_body_bytes: int,
        audit: Audit | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_import_bytes: int = 64 * 1024 * 1024,
        restart: Restart | None = None,
        store: ControlPlane | None = None,
        restart_engine: Restart | None = None,
        touch: Touch | None = None,
    ) -> None:
        self.authenticate = authenticate
        self.touch = touch  # records the connection's last use, as /mcp calls do
        self.audit = audit
        self.max_import_bytes = max_import_bytes
        self.restart = restart  # a stop that waits for calls in flight (after a restore)
        self.store = store  # settings, activity, connections (:mod:`.owner`) need the control plane
        self.restart_engine = restart_engine  # a restart even with calls in flight (new settings)
        self.engines = engines
        self.origin_policy = origin_policy
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes
        self.clock = clock

    def routes(self) -> list[Route]:
        """One route per path of the OpenAPI document (:func:`.contract.path_route`), each method
        taking only the query parameters the document declares for it."""
        handlers: list[tuple[str, str, Endpoint]] = [("GET", PREFIX + "/openapi.json", self.openapi)]
        handlers += [(op.method, PREFIX + op.path, self._endpoint(op)) for op in OPERATIONS]
        handlers += [
            (admin.method, PREFIX + admin.path, guarded(functools.partial(self._admin, admin)))
            for admin in ADMIN_OPERATIONS
        ]
        if self.store is not None:
            owner = OwnerApi(
                principal=self.principal_of,
                engines=self.engines,
                store=self.store,
                audit=self.audit,
                restart=self.restart_engine,
            )
            handlers += owner.handlers(PREFIX)
        transfer = TransferApi(
            principal=self.principal_of,
            engines=self.engines,
            max_import_bytes=self.max_import_bytes,
            audit=self.audit,
            restart=self.restart,
        )
        handlers += transfer.handlers(PREFIX)
        query = query_parameters(document())
        by_path: dict[str, dict[str, tuple[Endpoint, tuple[str, ...]]]] = {}
        for method, path, endpoint in handlers:
            by_path.setdefault(path, {})[method] = (endpoint, query.get((path, method), ()))
        return [path_route(path, methods) for path, methods in by_path.items()]

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(document())

    def _endpoint(self, op: Operation) -> Callable[[Request], Awaitable[Response]]:
        return guarded(lambda request: self._call(op, request))

    async def _admin(self, op: AdminOperation, request: Request) -> Response:
        """An admin operation: the same authentication and limits as a tool's, then the engine's
        ``/admin`` call (a change refused to a read-only connection before it reaches the engine)."""
        principal = await self.principal_of(request)
        try:
            query = query_of(op, list(request.query_params.multi_items()))
        except ValueError as exc:
            return refusal("invalid_input", str(exc))
        if op.writes and principal.read_only:
            return refusal(
                "read_only",
                "this connection is read-only: it can list memories but not change or delete them "
                "(ask the owner for a connection with write access)",
            )
        path = {p: str(request.path_params[p]) for p in op.path_params}
        async with self.engines.lease(principal.workspace_id) as lease:
            result = await op.call(lease.client, principal, path, query)
        if isinstance(result, ToolRefusal):
            return refusal(result.code, result.message)
        if op.audit is not None and self.audit is not None:
            remote = request.client.host if request.client else None
            await off_loop(
                self.audit,
                op.audit,
                principal,
                remote,
                {**path, "kind": result.get("kind"), "by": principal.connection_name},
            )
        return JSONResponse(result)

    async def principal_of(self, request: Request) -> Principal:
        """Who the bearer token speaks for (as on ``/mcp``), within this connection's rate limit. A
        call forwarded by another node (``run:scale-out``) was authenticated and limited there."""
        forwarded = request.scope.get(FORWARDED_PRINCIPAL)
        if isinstance(forwarded, Principal):
            return forwarded
        raw = list(request.scope["headers"])
        host = hdr.get(raw, b"host")
        if not hdr.host_allowed(self.origin_policy, host):
            raise HostNotAllowed(f"host {host!r} is not served here")
        base = hdr.base_url(self.origin_policy, request.url.scheme, host)
        principal = await self.authenticate(raw, base, request.client.host if request.client else None)
        decision = self.limiter.check(principal.connection_id, self.clock())
        if not decision.allowed:
            raise RateLimited(
                "too many requests on this connection; slow down", retry_after=decision.retry_after
            )
        if self.touch is not None:
            await self.touch(principal.connection_id)
        return principal

    async def _call(self, op: Operation, request: Request) -> Response:
        principal = await self.principal_of(request)
        try:
            if op.arguments == "body":
                arguments = arguments_from_body(op, await self._body(request))
            elif op.arguments == "query":
                arguments = arguments_from_query(op, list(request.query_params.multi_items()))
            else:
                arguments = {}
        except ValueError as exc:  # a wrong type is what the tools call a bad argument
            return refusal("invalid_argument" if isinstance(exc, WrongType) else "invalid_input", str(exc))
        arguments.update({p: request.path_params[p] for p in op.path_params})
        async with self.engines.lease(principal.workspace_id) as lease:
            result = await call_tool(lease.client, principal, op.tool, arguments)
        if isinstance(result, ToolRefusal):
            return refusal(result.code, result.message)
        return JSONResponse(result)

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise PayloadTooLarge(f"request bodies are limited to {self.max_body_bytes} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise PayloadTooLarge(f"request bodies are limited to {self.max_body_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
