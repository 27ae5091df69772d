"""An import from the Workspace page, with live progress and no JavaScript (``life:import``).

The engine streams its progress (``gateway.engines.admin.import_events``); the page streams with
it: the answer to the POST is one HTML page sent in pieces — its top at once, then a line per
step as the engine reports it ("import: copied 120 of 900 files"), then the summary (what was
imported, what was skipped and why) and the rest of the page.

The work is not tied to the browser: :func:`start` hands it to the supervisor
(:meth:`~gateway.engines.supervisor.Supervisor.spawn`), which holds the engine's lease, reads the
engine's events to the end, audits ``workspace.import`` and, after a restore, restarts the engine.
If the owner closes the tab mid-way, the engine finishes the import (it stages files and moves
them into place at the end, so no note is half-written) and the audit event is still written.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from markupsafe import escape
from starlette.requests import Request
from starlette.responses import StreamingResponse

from gateway.auth.csrf import attach_presession
from gateway.control.records import Workspace
from gateway.engines.admin import import_events
from gateway.engines.calls import ToolRefusal
from gateway.errors import GatewayError
from gateway.web.render import PAGE_HEADERS, render_text

#: Where the progress lines go in ``workspace_import.html`` (rendered once without a result for
#: the page's top, once with it for the rest).
MARKER = "ALMANAC-IMPORT-PROGRESS-7f3a"


@dataclass(frozen=True)
class Failed:
    """The import was refused or failed (nothing was written); ``message`` says what to fix."""

    message: str
    status: int = 400


Event = dict[str, Any] | Failed


def _failed(item: ToolRefusal | GatewayError) -> Failed:
    if isinstance(item, ToolRefusal):
        return Failed(item.message[:1].upper() + item.message[1:])
    return Failed(item.message, item.status)


async def start(
    request: Request,
    workspace: Workspace,
    content: AsyncIterator[bytes],
    label: str | None,
    finished: Callable[[dict[str, Any]], None],
) -> tuple[Event, MemoryObjectReceiveStream[Event]]:
    """Start the import beside the request; returns its first event (progress, the result, or
    :class:`Failed` when it was refused before anything was written) and the stream of the rest.
    ``finished(result)`` runs once it succeeded, whether or not anyone still listens."""
    parts = request.app.state.components
    send, receive = anyio.create_memory_object_stream[Event](math.inf)

    async def relay() -> None:
        result: dict[str, Any] | None = None
        async with send:
            try:
                async with parts.engines.lease(workspace.id) as lease:
                    async for item in import_events(lease.client, content, label):
                        if isinstance(item, ToolRefusal):
                            _tell(send, _failed(item))
                            return
                        if "result" in item:
                            result = item["result"]
                        else:
                            _tell(send, item)
            except GatewayError as exc:
                _tell(send, _failed(exc))
                return
            if result is None:
                return
            try:
                if result["kind"] == "restore":
                    await parts.engines.stop(workspace.id, reason="restore")  # next call reads it afresh
                finished(result)
            finally:
                _tell(send, {"result": result})  # it was imported, whatever happens here

    parts.engines.spawn(relay)
    try:
        first = await receive.receive()
    except anyio.EndOfStream:
        first = Failed("the workspace's engine did not answer; try again", 503)
    return first, receive


def _tell(send: MemoryObjectSendStream[Event], event: Event) -> None:
    """Pass an event on if the page still listens (the work goes on either way)."""
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        send.send_nowait(event)


def page(
    request: Request, workspace: Workspace, label: str, first: Event, rest: MemoryObjectReceiveStream[Event]
) -> StreamingResponse:
    """The streamed progress page: its top, a line per progress event, then the summary."""
    values = {"workspace": workspace, "label": label, "marker": MARKER}
    top = render_text(request, "workspace_import.html", result=None, error=None, **values).split(MARKER)[0]

    async def body() -> AsyncIterator[str]:
        result: dict[str, Any] | None = None
        error: str | None = None
        with rest:
            yield top
            event: Event | None = first
            while event is not None:
                if isinstance(event, Failed):
                    error = event.message
                    break
                if "result" in event:
                    result = event["result"]
                    break
                yield f"<li>{escape(event['progress'])}</li>\n"
                try:
                    event = await rest.receive()
                except anyio.EndOfStream:
                    error = "the workspace's engine stopped answering mid-import; nothing was imported"
                    event = None
        html = render_text(request, "workspace_import.html", result=result, error=error, **values)
        yield html.split(MARKER, 1)[1]

    response = StreamingResponse(body(), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)
    attach_presession(request, response)
    return response
