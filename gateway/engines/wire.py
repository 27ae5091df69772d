"""HTTP/1.1 to one engine's Unix socket: a keep-alive connection pool, as an httpx transport.

Every call the gateway makes to an engine — the ``/mcp`` proxy, REST, the pages — goes through
:class:`EngineTransport` (``perf:gateway``). httpx's own transport (httpcore and h11 over anyio
streams) cost about half of the gateway's CPU per proxied call, and wrote each request in two
pieces (head, then body): two system calls, two wake-ups of the engine. Here a request goes out in
one write when its body is known, and the reply is parsed by ``httptools`` (llhttp, the parser
uvicorn uses) straight from the event loop's protocol callbacks.

What it keeps of httpx's transport: connections reused for at most ``keepalive_expiry`` idle
seconds (dropped at once when the engine closes them), at most ``max_connections`` at a time
(waiting up to the ``pool`` timeout for one), the ``connect``, ``write`` and ``read`` timeouts of
each request (``read=None``: a stream of progress notifications may run long), request bodies of
any size (streamed ones chunked), streamed replies with back-pressure (reading pauses while a
slow reader leaves more than :data:`HIGH_WATER` bytes unread), and httpx's errors
(:class:`httpx.TransportError` and its subclasses). A reply not read to its end, or closed early,
closes its connection: the engine sees the caller go away.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httptools
import httpx

#: Unread reply bytes above which the connection stops reading (resumed below :data:`LOW_WATER`).
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024
#: Request bodies up to this size go out in the same write as the head.
ONE_WRITE = 256 * 1024


class _Connection(asyncio.Protocol):
    """One connection: one request at a time; the reply's head, then its body chunk by chunk."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.complete = False  # the current reply was read to its end
        self.keep_alive = False
        self._parser: httptools.HttpResponseParser | None = None
        self._head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._reading_paused = False
        self._more: asyncio.Future[None] | None = None  # a reader waits for a chunk or the end
        self._writable: asyncio.Future[None] | None = None  # a writer waits for the buffer to drain
        self._error: httpx.TransportError | None = None

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._parser is None:  # nothing asked: the connection cannot be trusted any more
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"the engine's reply is not valid HTTP: {exc}"))
            self.close()

    def eof_received(self) -> bool:
        return False  # close the transport: a reply cut short is an error, seen in connection_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._head is not None and not self._head.done():
            self._fail(httpx.RemoteProtocolError("Server disconnected without sending a response."))
        elif self._parser is not None and not self.complete:
            self._fail(httpx.ReadError("the engine closed the connection before the reply's end"))
        self._wake_writer()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake_writer()

    # -- httptools callbacks --------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        assert self._parser is not None and self._head is not None
        if not self._head.done():
            self._head.set_result((self._parser.get_status_code(), self._headers))

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def on_message_complete(self) -> None:
        assert self._parser is not None
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self._wake_reader()

    # -- used by the transport ------------------------------------------------------------------

    def begin(self) -> asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]]:
        """Ready for a new request; the future is its reply's status and raw headers."""
        self._parser = httptools.HttpResponseParser(self)
        self._head = asyncio.get_running_loop().create_future()
        self._headers, self.complete, self.keep_alive, self._error = [], False, False, None
        return self._head

    def write(self, data: bytes) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise httpx.WriteError("the connection to the engine is closed")
        self.transport.write(data)

    async def drain(self, timeout: float | None) -> None:
        """Until the write buffer is below its high-water mark again (:class:`httpx.WriteTimeout`)."""
        if self._writable is None:
            return
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._writable)
        except TimeoutError:
            raise httpx.WriteTimeout("the engine did not take the request in time") from None
        if self.closed:
            raise httpx.WriteError("the connection to the engine is closed")

    async def chunk(self, timeout: float | None) -> bytes | None:
        """The reply's next piece of body; None at its end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self.complete:
                return None
            self._more = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:  # the proxy's calls: no timer to set and cancel
                    await self._more
                else:
                    async with asyncio.timeout(timeout):
                        await self._more
            except TimeoutError:
                raise httpx.ReadTimeout("the engine's reply did not go on in time") from None
            finally:
                self._more = None
        data = self._chunks.popleft()
        self._buffered -= len(data)
        if self._reading_paused and self._buffered < LOW_WATER and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.closed and self._parser is not None

    def idle(self, now: float) -> None:
        self._parser, self._head, self.idle_since = None, None, now
        self._chunks.clear()
        self._buffered = 0

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, error: httpx.TransportError) -> None:
        self._error = error
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved: a caller already gone leaves no warning behind
        self._wake_reader()

    def _wake_reader(self) -> None:
        if self._more is not None and not self._more.done():
            self._more.set_result(None)

    def _wake_writer(self) -> None:
        if self._writable is not None:
            if not self._writable.done():
                self._writable.set_result(None)
            self._writable = None


class EngineBody(httpx.AsyncByteStream):
    """A reply's body as it arrives; closing it gives the connection back (or closes it)."""

    def __init__(self, pool: EngineTransport, connection: _Connection, read_timeout: float | None) -> None:
        self._pool, self._connection, self._read_timeout = pool, connection, read_timeout
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (data := await self._connection.chunk(self._read_timeout)) is not None:
            yield data

    async def read(self) -> bytes:
        """The rest of the body, whole: what joining the pieces of ``async for`` gives, without an
        async generator per reply (the proxy reads a JSON reply this way)."""
        pieces = []
        while (data := await self._connection.chunk(self._read_timeout)) is not None:
            pieces.append(data)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            self._pool.release(self._connection)


@dataclass(frozen=True, slots=True)
class EngineCall:
    """A request with its body already read, sent by :meth:`EngineTransport.send_call`: the
    ``/mcp`` proxy's calls, with no ``httpx.Request`` built for them (it cost about 20 µs a call)."""

    method: str
    #: The request target, e.g. ``b"/mcp"``; :attr:`url` is the same for the logs.
    target: bytes
    url: str
    #: Every header as it goes out, ``Host`` and ``Content-Length`` included.
    headers: Sequence[tuple[bytes, bytes]]
    body: bytes
    #: httpx's timeout names (``connect``, ``write``, ``read``, ``pool``); None: no limit.
    timeout: Mapping[str, float | None]


class EngineTransport(httpx.AsyncBaseTransport):
    """Requests to the engine listening on the Unix socket ``path``."""

    def __init__(
        self,
        path: str,
        *,
        max_connections: int,
        keepalive_expiry: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.keepalive_expiry, self.clock = path, keepalive_expiry, clock
        self._idle: list[_Connection] = []  # most recently used last
        self._free = asyncio.Semaphore(max_connections)
        self._open: set[_Connection] = set()
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout: dict[str, Any] = request.extensions.get("timeout", {})
        return await self._exchange(
            timeout, lambda connection: self._send(connection, request, timeout.get("write"))
        )

    async def send_call(self, call: EngineCall) -> httpx.Response:
        """What :meth:`handle_async_request` does with the ``httpx.Request`` of the same method,
        target, headers and body — the same bytes on the wire — without building one: the head is
        written straight from the raw headers, with the body, in one write (the proxy's calls)."""
        lines = [b"%s %s HTTP/1.1\r\n" % (call.method.encode("ascii"), call.target)]
        lines += [b"%s: %s\r\n" % (name, value) for name, value in call.headers]
        lines.append(b"\r\n")
        lines.append(call.body)
        data = b"".join(lines)

        async def write(connection: _Connection) -> None:
            connection.write(data)
            await connection.drain(call.timeout.get("write"))

        return await self._exchange(call.timeout, write)

    async def _exchange(
        self, timeout: Mapping[str, float | None], write: Callable[[_Connection], Awaitable[None]]
    ) -> httpx.Response:
        await self._acquire(timeout.get("pool"))
        try:
            connection = self._reuse() or await self._connect(timeout.get("connect"))
        except BaseException:
            self._free.release()
            raise
        try:
            head = connection.begin()
            await write(connection)
            read = timeout.get("read")
            if read is None:  # the proxy's calls: no timer to set and cancel
                status, headers = await head
            else:
                try:
                    async with asyncio.timeout(read):
                        status, headers = await head
                except TimeoutError:
                    raise httpx.ReadTimeout("the engine did not answer in time") from None
        except BaseException:
            connection.close()
            self.release(connection)
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=EngineBody(self, connection, timeout.get("read")),
            extensions={"http_version": b"HTTP/1.1"},
        )

    def release(self, connection: _Connection) -> None:
        """The connection's request is over: keep it for the next one, or close it."""
        self._free.release()
        if connection.reusable() and not self._closed:
            connection.idle(self.clock())
            self._idle.append(connection)
        else:
            connection.close()
            self._open.discard(connection)

    @property
    def connections(self) -> int:
        """Connections open now (in use or idle)."""
        return sum(1 for connection in self._open if not connection.closed)

    async def aclose(self) -> None:
        self._closed = True
        for connection in self._open:
            connection.close()
        self._idle.clear()
        self._open.clear()

    async def _acquire(self, timeout: float | None) -> None:
        if self._closed:
            raise httpx.ConnectError("the engine's connection pool is closed")
        if not self._free.locked():
            await self._free.acquire()  # returns at once
            return
        try:
            async with asyncio.timeout(timeout):
                await self._free.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("every connection to the engine stayed busy") from None

    def _reuse(self) -> _Connection | None:
        now = self.clock()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < self.keepalive_expiry:
                return connection
            connection.close()
            self._open.discard(connection)
        return None

    async def _connect(self, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_unix_connection(_Connection, self.path)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection to the engine at {self.path} in time") from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to the engine at {self.path}: {exc}") from exc
        self._open.add(connection)
        return connection

    async def _send(self, connection: _Connection, request: httpx.Request, timeout: float | None) -> None:
        target = request.url.raw_path
        lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), target)]
        lines += [b"%s: %s\r\n" % (name, value) for name, value in request.headers.raw]
        lines.append(b"\r\n")
        head = b"".join(lines)
        try:
            body: bytes | None = request.content
        except httpx.RequestNotRead:
            body = None
        if body is not None and len(body) <= ONE_WRITE:
            connection.write(head + body)
        elif body is not None:
            connection.write(head)
            connection.write(body)
        else:  # a streamed body: chunked, as httpx framed it (Transfer-Encoding in the head)
            connection.write(head)
            chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
            async for chunk in request.stream:  # type: ignore[union-attr]
                if chunk:
                    connection.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                    await connection.drain(timeout)
            if chunked:
                connection.write(b"0\r\n\r\n")
        await connection.drain(timeout)
