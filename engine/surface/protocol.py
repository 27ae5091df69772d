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

The loop only checks the call and hands it to a tool thread, which runs the rest — the tool, the
result's conversion, the JSON, the framing — and writes the reply itself, through a copy of the
connection's socket (``writable_copy``: only when nothing waits in the transport's buffer to go
out first; the copy keeps the descriptor this connection's even if the loop closes it meanwhile).
Only then is the loop told (``call_soon_threadsafe``) and the reply marked complete; the next
request on the connection, if it comes in first, marks it. So the caller is not kept waiting for
the loop to wake between the call's end and its reply. What the thread does not write (a full
socket, a call that failed) the loop writes, as before.

What it takes of uvicorn's internals (the protocol class, its request cycle, the status lines)
comes through :mod:`engine.surface.sdk`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any, cast

from engine.surface.handoff import After
from engine.surface.lean import Reply, reply_headers
from engine.surface.notify import TOOL_THREADS
from engine.surface.replies import Replies, Scope
from engine.surface.sdk import HIGH_WATER_LIMIT, ASGI3Application, Cycle, HttpProtocol, status_line

_PATH = "/mcp"


def holdable(cycle: Cycle) -> bool:
    """A request :class:`SocketProtocol` may answer itself: ``POST /mcp``, keep-alive, no access
    log, no ``100 Continue`` awaited, a declared body small enough to arrive without back-pressure."""
    scope = cycle.scope
    if scope["method"] != "POST" or scope["path"] != _PATH or scope.get("root_path"):
        return False
    if not cycle.keep_alive or cycle.access_log or cycle.waiting_for_100_continue:
        return False
    lengths = [value for name, value in scope["headers"] if name == b"content-length"]
    return len(lengths) == 1 and lengths[0].isdigit() and int(lengths[0]) <= HIGH_WATER_LIMIT


def framed(cycle: Cycle, status: int, body: bytes) -> bytes:
    """The reply as uvicorn's ``send`` writes a JSON body of known length on a keep-alive connection."""
    content = [status_line(status)]
    for name, value in [*cycle.default_headers, *reply_headers(body)]:
        content.extend([name.lower(), b": ", value, b"\r\n"])
    if not cycle.keep_alive:  # the server is stopping (uvicorn's shutdown)
        content.append(b"connection: close\r\n")
    content.extend([b"\r\n", body])
    return b"".join(content)


class SocketProtocol(HttpProtocol):
    """uvicorn's ``httptools`` protocol; a plain tool call is answered by ``replies`` (set by
    :func:`protocol_for`) without the ASGI app."""

    replies: Replies

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: tuple[Cycle, ASGI3Application] | None = None
        #: A reply a tool thread has written whole, not yet complete here (``_complete_written``).
        self._written: Cycle | None = None

    def start_app(self, cycle: Cycle, app: ASGI3Application) -> None:
        if not holdable(cycle):
            super().start_app(cycle, app)
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

    def _answer_soon(self, cycle: Cycle, app: ASGI3Application) -> None:
        task = self.loop.create_task(self._answer(cycle, app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _answer(self, cycle: Cycle, app: ASGI3Application) -> None:
        try:
            job = await self.replies.at_once(cast(Scope, cycle.scope), bytes(cycle.body))
            if job is None:
                await cycle.run_asgi(app)
                return
            outcome: asyncio.Future[bytes | None] = self.loop.create_future()
            TOOL_THREADS.start(functools.partial(self._reply, cycle, job, writable_copy(cycle), outcome))
            rest = await outcome
        except BaseException as exc:  # as uvicorn's run_asgi treats the app's
            cycle.logger.error("Exception in ASGI application\n", exc_info=exc)
            await cycle.send_500_response()
            cycle.on_response = lambda: None
            return
        if rest is None:
            return  # the tool thread wrote it all (and the reply is complete)
        if cycle.flow.write_paused and not cycle.disconnected:
            await cycle.flow.drain()
        if cycle.disconnected:
            return  # the caller left: nothing to write, as uvicorn's send
        cycle.response_started = True
        cycle.transport.write(rest)
        completed(cycle)

    def _reply(
        self,
        cycle: Cycle,
        job: Callable[[], Reply],
        fd: int | None,
        outcome: asyncio.Future[bytes | None],
    ) -> After:
        """On a tool thread: the call, its reply framed and, through ``fd`` (a copy of the
        connection's socket, or None), written; then what the loop is to hear of it (once this
        thread is idle again): the reply complete, or the bytes still to write."""
        try:
            try:
                data = framed(cycle, *job())
            except BaseException as exc:
                return self._tell(settle, outcome, exc)
            sent = 0
            if fd is not None:
                with contextlib.suppress(OSError):  # full (BlockingIOError) or gone: the loop writes
                    sent = os.write(fd, data)
        finally:
            if fd is not None:
                os.close(fd)
        if sent < len(data):
            return self._tell(settle, outcome, data[sent:])
        self._written = cycle
        return self._tell(self._complete_written, cycle, outcome)

    def _tell(self, callback: Callable[..., object], *args: Any) -> After:
        def tell() -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: no one is waiting
                self.loop.call_soon_threadsafe(callback, *args)

        return tell

    def data_received(self, data: bytes) -> None:
        self._complete_written()  # the reply went out before this request could be sent
        super().data_received(data)

    def _complete_written(
        self, cycle: Cycle | None = None, outcome: asyncio.Future[bytes | None] | None = None
    ) -> None:
        """The reply a tool thread wrote whole (``cycle``'s, or any) complete, as after uvicorn's
        ``send`` of a last body: once, by whichever comes first, the thread's word or the next
        request's bytes."""
        written = self._written
        if written is not None and (cycle is None or written is cycle):
            self._written = None
            completed(written)
        if outcome is not None:
            settle(outcome, None)


def writable_copy(cycle: Cycle) -> int | None:
    """A copy of the connection's socket for a tool thread to write the reply to, if nothing is
    waiting to go out before it (the transport's buffer empty, writing not paused); None if the
    loop is to write it. A copy: the connection may close meanwhile, and its descriptor's number
    be given to another; the copy's stays this connection's until the thread closes it."""
    transport = cycle.transport
    if cycle.disconnected or transport.is_closing() or cycle.flow.write_paused:
        return None
    if transport.get_write_buffer_size():
        return None
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    try:
        return os.dup(sock.fileno())
    except OSError:
        return None


def settle(outcome: asyncio.Future[bytes | None], rest: bytes | BaseException | None) -> None:
    """What the tool thread left to the loop: the bytes still to write, the call's failure, or
    None (the reply written whole)."""
    if outcome.done():
        return  # the task waiting for it has been cancelled (the server is stopping)
    if isinstance(rest, BaseException):
        outcome.set_exception(rest)
    else:
        outcome.set_result(rest)


def completed(cycle: Cycle) -> None:
    """The cycle's reply written: what uvicorn's ``send`` does after a last body."""
    cycle.response_started = True
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    done, cycle.on_response = cycle.on_response, lambda: None
    done()


def protocol_for(replies: Replies) -> type[SocketProtocol]:
    """The protocol class uvicorn is to build per connection, answering through ``replies``."""
    return type("BoundSocketProtocol", (SocketProtocol,), {"replies": replies})
