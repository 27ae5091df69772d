"""One wrapper for every ``/api/v1`` endpoint: a :class:`GatewayError` raised inside becomes the
gateway's JSON error reply (status, headers and body from :func:`gateway.errors.render`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import GatewayError, render

Endpoint = Callable[[Request], Awaitable[Response]]


def guarded(call: Endpoint) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        try:
            return await call(request)
        except GatewayError as exc:
            status, headers, body = render(exc)
            return Response(body, status_code=status, headers=headers)

    return endpoint
