"""The engine socket's HTTP/1.1: uvicorn's ``httptools`` protocol, a plain tool call answered in it.

uvicorn parses each request and runs the ASGI app as a task: its wrappers, Starlette's middleware
and router, ``/mcp``'s endpoint reading the body back through ``receive``, and two ``send``
messages, each written to the socket on its own — so a caller wakes for the reply's head, then
again for its body. The engine's commonest request, a plain ``tools/call`` of one of its own tools
(``engine.surface.direct``), needs none of that: its reply is one JSON body.

:class:`SocketProtocol` is uvicorn's protocol with one change. A ``POST /mcp`` with a small body
(its length declared, no ``Expect: 100-continue``, keep-alive) is held until its body is in; then
:meth:`engine.surface.replies.Replies.at_once` decides. If it answers, the reply goes out in one
write, framed exactly as uvicorn frames the app's reply (status line, uvicorn's ``date`` and
``server`` headers, then the app's), and the connection carries on as after any reply. Anything
else (``at_once`` returns None before anything has run) goes to the app unchanged, its body
already read. ``tests/engine/surface/test_lean_contract.py`` compares the bytes with an engine
that answers everything through the app.
"""

from __future__ import annotations

from typing import Any, cast

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

from engine.surface.lean import reply_headers
from engine.surface.replies import Replies, Scope

_PATH = "/mcp"


def holdable(cycle: RequestResponseCycle) -> bool:
    """A request :class:`SocketProtocol` may answer itself: ``POST /mcp``, keep-alive, no access
    log, no ``100 Continue`` awaited, a declared body small enough to arrive without back-pressure."""
    scope = cycle.scope
    if scope["method"] != "POST" or scope["path"] != _PATH or scope.get("root_path"):
        return False
    if not cycle.keep_alive or cycle.access_log or cycle.waiting_for_100_continue:
        return False
    lengths = [value for name, value in scope["headers"] if name == b"content-length"]
    return len(lengths) == 1 and lengths[0].isdigit() and int(lengths[0]) <= HIGH_WATER_LIMIT


def framed(cycle: RequestResponseCycle, status: int, body: bytes) -> bytes:
    """The reply as uvicorn's ``send`` writes a JSON body of known length on a keep-alive connection."""
    content = [STATUS_LINE[status]]
    for name, value in [*cycle.default_headers, *reply_headers(body)]:
        content.extend([name.lower(), b": ", value, b"\r\n"])
    content.extend([b"\r\n", body])
    return b"".join(content)


class SocketProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol; a plain tool call is answered by ``replies`` (set by
    :func:`protocol_for`) without the ASGI app."""

    replies: Replies

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: tuple[RequestResponseCycle, ASGI3Application] | None = None

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if not holdable(cycle):
            super()._start_asgi_task(cycle, app)
        elif cycle.more_body:
            self._held = (cycle, app)  # answered once its body is in (on_message_complete)
        else:
            self._answer_soon(cycle, app)  # a pipelined request, its body read already

    def on_message_complete(self) -> None:
        super().on_message_complete()
        held = self._held
        if held is not None and held[0] is self.cycle and not held[0].more_body:
            self._held = None
            self._answer_soon(*held)

    def _answer_soon(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        task = self.loop.create_task(self._answer(cycle, app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _answer(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        try:
            reply = await self.replies.at_once(cast(Scope, cycle.scope), bytes(cycle.body))
        except BaseException as exc:  # as uvicorn's run_asgi treats the app's
            cycle.logger.error("Exception in ASGI application\n", exc_info=exc)
            await cycle.send_500_response()
            cycle.on_response = lambda: None
            return
        if reply is None:
            await cycle.run_asgi(app)
            return
        if cycle.flow.write_paused and not cycle.disconnected:
            await cycle.flow.drain()
        if cycle.disconnected:
            return  # the caller left: nothing to write, as uvicorn's send
        cycle.response_started = True
        cycle.transport.write(framed(cycle, *reply))
        cycle.response_complete = True
        cycle.message_event.set()
        done, cycle.on_response = cycle.on_response, lambda: None
        done()


def protocol_for(replies: Replies) -> type[SocketProtocol]:
    """The protocol class uvicorn is to build per connection, answering through ``replies``."""
    return type("BoundSocketProtocol", (SocketProtocol,), {"replies": replies})
