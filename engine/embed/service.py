"""The host embedder service: one local model per host, shared by every engine over a Unix socket.

Started as ``python -m engine.embed --socket PATH [--threads N]``. Endpoints (see
``docs/embedder-service.md``):

- ``POST /embed`` ``{"texts": [...], "kind": "document"|"query"}`` → JSON
  ``{"model", "dim", "vectors"}``, or raw little-endian float32 rows when the request says
  ``Accept: application/octet-stream`` (headers ``X-Embed-Model``, ``X-Embed-Dim``, ``X-Embed-Count``).
- ``GET /status`` → the model's :class:`~engine.embed.base.ProviderStatus` (a real call each time).
- ``GET /healthz`` → ``{"status": "ok"}`` once the socket accepts connections and the model is loaded.

The socket file is created with mode 0600. Queries (a ``get_context`` someone waits for) and
document batches (an engine's background indexing) never wait for each other: queries are embedded
one at a time on the server's worker threads, document batches one at a time on a thread of their
own whose CPU priority is :data:`DOCUMENT_NICE` steps lower (Linux, where priority is per thread),
so on a busy host the calls people wait on — in this service, the gateway and the engines — get the
cores first and the background indexing takes what is left (``perf:gateway``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.embed.base import Embedder, Matrix
from engine.embed.errors import EmbedError
from engine.embed.remote import BINARY, H_COUNT, H_DIM, H_MODEL, RemoteEmbedder

__all__ = [
    "DOCUMENT_NICE",
    "MAX_TEXTS",
    "RemoteEmbedder",
    "ServiceAlreadyRunning",
    "bind_socket",
    "create_app",
    "serve",
]

MAX_TEXTS: Final = 1024
#: How many ``nice`` steps below the service the thread that embeds document batches runs.
DOCUMENT_NICE: Final = 10


def lower_priority(steps: int) -> None:
    """Lower the calling thread's CPU priority by ``steps`` (a ``nice`` increment, capped at 19).
    Linux only, where priority is a thread's own; elsewhere, or if refused, nothing changes."""
    if sys.platform != "linux" or steps <= 0:
        return
    tid = threading.get_native_id()
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + steps))


class ServiceAlreadyRunning(Exception):
    """Another embedder service answers on the socket path."""


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def create_app(embedder: Embedder, *, document_nice: int = DOCUMENT_NICE) -> Starlette:
    """The service's ASGI app around ``embedder`` (which it probes, and so loads, at startup)."""
    one_query = threading.Lock()
    documents = ThreadPoolExecutor(
        1, thread_name_prefix="embed-documents", initializer=lower_priority, initargs=(document_nice,)
    )

    def run_query(texts: list[str]) -> Matrix:
        with one_query:
            if not texts:
                return embedder.embed_documents([])
            return _stack([embedder.embed_query(t) for t in texts])

    async def run_embed(texts: list[str], kind: str) -> Matrix:
        if kind == "query":
            return await anyio.to_thread.run_sync(run_query, texts)
        return await asyncio.wrap_future(documents.submit(embedder.embed_documents, texts))

    async def embed(request: Request) -> Response:
        try:
            payload: Any = await request.json()
        except ValueError:
            return _error(400, "invalid_request", "the body is not JSON")
        texts, kind = (
            (payload.get("texts"), payload.get("kind", "document"))
            if isinstance(payload, dict)
            else (None, None)
        )
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return _error(400, "invalid_request", 'send {"texts": [strings], "kind": "document"|"query"}')
        if kind not in ("document", "query"):
            return _error(400, "invalid_request", 'kind must be "document" or "query"')
        if len(texts) > MAX_TEXTS:
            return _error(400, "invalid_request", f"at most {MAX_TEXTS} texts per request; split the batch")
        try:
            vectors = await run_embed(texts, kind)
        except EmbedError as exc:
            return _error(503, exc.code, exc.message)
        model, dim = embedder.model_id, embedder.dim
        if BINARY in request.headers.get("accept", ""):
            headers = {H_MODEL: model, H_DIM: str(dim), H_COUNT: str(len(texts))}
            return Response(vectors.astype("<f4").tobytes(), media_type=BINARY, headers=headers)
        return JSONResponse({"model": model, "dim": dim, "vectors": vectors.tolist()})

    async def status(request: Request) -> Response:
        result = await anyio.to_thread.run_sync(embedder.probe)
        return JSONResponse(result.to_json())

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        warm = await anyio.to_thread.run_sync(embedder.probe)
        if not warm.ready:
            print(f"embedder service: {warm.provider} is {warm.state}: {warm.detail}", file=sys.stderr)
        try:
            yield
        finally:
            documents.shutdown(wait=False, cancel_futures=True)

    routes = [
        Route("/embed", embed, methods=["POST"]),
        Route("/status", status, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _stack(rows: list[Any]) -> Matrix:
    import numpy as np

    out: Matrix = np.stack(rows).astype(np.float32)
    return out


def bind_socket(path: Path) -> socket.socket:
    """A listening Unix socket at ``path`` with mode 0600, replacing a stale socket file.

    Raises :class:`ServiceAlreadyRunning` when a live service answers on ``path``.
    """
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody listens: a leftover of a crash
        else:
            raise ServiceAlreadyRunning(f"an embedder service already listens on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    sock.listen(128)
    return sock


def serve(socket_path: Path, embedder: Embedder) -> None:
    """Serve ``embedder`` on ``socket_path`` until SIGTERM/SIGINT; removes the socket file on exit."""
    import signal

    import uvicorn

    sock = bind_socket(socket_path)
    config = uvicorn.Config(
        create_app(embedder),
        log_level="warning",
        ws="none",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    # uvicorn re-raises the stop signal after its graceful shutdown; with these handlers in place
    # that re-raise is a no-op, so a SIGTERM or SIGINT stop exits with status 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: None)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
