"""What every ``/admin`` route shares: the :class:`Parts` it may use, and :func:`refusal`, the JSON
refusal (``{"error": {"code", "message"}}``, status 400, 403, 404 or 409) built from the engine's one
error tree. The concept modules (``memories``, ``transfer``, ``settings``, ``activity``) import
this; :mod:`engine.admin` composes their routes.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.errors import EngineError, Forbidden, InvalidInput, NotFound, without_paths
from engine.index.indexer import Indexer
from engine.memory import Memory
from engine.settings import Loaded
from engine.store.workspace import Workspace
from engine.transfer.limits import DEFAULT, Limits


@dataclass(frozen=True)
class Parts:
    """What admin routes may use: the running engine's store, memory service and index."""

    workspace: Workspace
    memory: Memory
    indexer: Indexer | None = None
    settings: Loaded | None = None  # what this engine runs with (read once, at start)
    instance_file: Path | None = None  # the operator's settings file (--settings), if any
    overrides: Mapping[str, object] | None = None  # command-line settings (--embedding-provider)
    import_limits: Limits = DEFAULT  # how much an import may unpack (--index-max-bytes, --import-max-bytes)
    stopping: threading.Event = field(default_factory=threading.Event)  # set once the engine stops


def refusal(exc: EngineError) -> JSONResponse:
    """An engine error as the admin surface's JSON refusal (the tools' stable codes)."""
    status = 400 if isinstance(exc, InvalidInput) else 404 if isinstance(exc, NotFound) else 409
    if isinstance(exc, Forbidden):
        status = 403
    message = without_paths(exc.message)  # a message may name a file; the client sees no server path
    return JSONResponse({"error": {"code": exc.code, "message": message}}, status_code=status)


Endpoint = Callable[[Request], Awaitable[Response]]


def refusing(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` with every :class:`EngineError` it raises answered as a :func:`refusal`."""

    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except EngineError as exc:
            return refusal(exc)

    return wrapped
