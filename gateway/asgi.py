"""What the gateway's request handlers share, below every layer that serves requests.

- :class:`ClientGone`, :func:`read_all` and :func:`send_error`: reading a request body within a
  limit, and answering a :class:`~gateway.errors.GatewayError` from a pure ASGI app (``/mcp``, the
  nodes' internal endpoints, REST forwarding) the way :func:`gateway.errors.render` says.
- :func:`off_loop`: a blocking control-plane call (the control plane is a database: a file or a
  server) run on a worker thread, so the event loop never waits on it. At most :data:`THREADS` such
  calls run at once.

The ASGI types themselves are Starlette's (``starlette.types``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread
from starlette.types import Receive, Send

from gateway.errors import GatewayError, PayloadTooLarge, render

P = ParamSpec("P")
T = TypeVar("T")

#: Control-plane calls from the request path run on at most this many worker threads at once.
THREADS = 4

_limiter: anyio.CapacityLimiter | None = None


class ClientGone(Exception):
    """The client went away before we answered."""


async def send_error(send: Send, exc: GatewayError) -> None:
    status, headers, body = render(exc)
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    raw.append((b"content-length", str(len(body)).encode("ascii")))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def read_all(receive: Receive, limit: int) -> bytes:
    """The whole request body, refused with 413 once it passes ``limit`` bytes (whatever the
    Content-Length said); :class:`ClientGone` when the client hangs up first."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request bodies are limited to {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _control_limiter() -> anyio.CapacityLimiter:
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(THREADS)
    return _limiter


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` — a blocking control-plane call — on a worker thread."""
    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=_control_limiter())
