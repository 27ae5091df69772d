"""The gateway's HTTP/1.1 pool to an engine's Unix socket (``gateway/engines/wire.py``, ``perf:gateway``).

Against a real engine (through the supervisor, both sides' real code) and against a real uvicorn
server on a Unix socket in the test's own event loop, for what an engine does rarely: close idle
connections, die mid-reply, answer late, stream a long reply to a slow reader.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from gateway.control.records import Principal
from gateway.edge.proxy import engine_call, engine_request
from gateway.engines.calls import call_tool
from gateway.engines.wire import HIGH_WATER, EngineBody, EngineTransport
from tests.gateway.engines.test_supervisor import make_config, supervising

pytestmark = pytest.mark.anyio

Scope = dict[str, Any]


class App:
    """``/echo`` answers the request body's length and digest; ``/stream?n=N`` sends N chunks of 64 KiB;
    ``/broken`` sends a part of its body and fails; ``/slow`` answers after a second; ``/held`` sends
    one chunk and waits for the client to leave (then sets :attr:`left`)."""

    def __init__(self) -> None:
        self.left = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path, body, more = scope["path"], b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if path == "/echo":
            reply = f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"x-seen", b"1")]})
            await send({"type": "http.response.body", "body": reply})
        elif path == "/stream":
            count = int(scope["query_string"].decode().removeprefix("n="))
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for i in range(count):
                chunk = bytes([i % 256]) * 65536
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif path == "/broken":
            length = [(b"content-length", b"100")]
            await send({"type": "http.response.start", "status": 200, "headers": length})
            await send({"type": "http.response.body", "body": b"x" * 10, "more_body": True})
            raise RuntimeError("the engine fell over mid-reply")
        elif path == "/slow":
            await anyio.sleep(1.0)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"late"})
        elif path == "/held":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            self.left.set()


@asynccontextmanager
async def serving(tmp_path: Path, app: App, *, keep_alive: float = 5.0) -> AsyncIterator[str]:
    """uvicorn serving ``app`` on a Unix socket until the block ends; yields the socket's path."""
    path = str(tmp_path / "fake-engine.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(16)
    config = uvicorn.Config(app, log_level="critical", lifespan="off", timeout_keep_alive=keep_alive)  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        try:
            yield path
        finally:
            server.should_exit = True
    sock.close()


def client(path: str, *, max_connections: int = 4, timeout: httpx.Timeout | None = None) -> httpx.AsyncClient:
    transport = EngineTransport(path, max_connections=max_connections, keepalive_expiry=30.0)
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=timeout or 5.0)


def pool(http: httpx.AsyncClient) -> EngineTransport:
    transport = http._transport
    assert isinstance(transport, EngineTransport)
    return transport


@pytest.mark.req("perf:gateway")
async def test_calls_to_a_real_engine_reuse_one_connection(tmp_path: Path) -> None:
    principal = Principal("own_1", "ws_1", "con_1", "wire test", False, None)
    async with supervising(make_config(tmp_path)) as sup, sup.lease("ws_1") as lease:
        assert isinstance(lease.transport, EngineTransport)
        for i in range(3):
            result = await call_tool(lease.client, principal, "remember", {"statement": f"fjord note {i}"})
            assert isinstance(result, dict), result
        assert (await lease.client.get("/healthz")).json() == {"status": "ok"}
        refused = await call_tool(lease.client, principal, "remember", {"statement": ""})
        assert not isinstance(refused, dict) and refused.code  # the engine's own refusal, parsed
        assert lease.transport.connections == 1


async def test_request_bodies_arrive_whole_in_one_piece_or_streamed(tmp_path: Path) -> None:
    app = App()
    async with serving(tmp_path, app) as path, client(path) as http:
        small = b'{"jsonrpc":"2.0"}'
        reply = await http.post("/echo", content=small)
        assert reply.text == f"{len(small)} {hashlib.sha256(small).hexdigest()}"
        assert reply.headers["x-seen"] == "1"
        big = bytes(range(256)) * 8192  # 2 MiB: past the one-write size
        assert (await http.post("/echo", content=big)).text == f"{len(big)} {hashlib.sha256(big).hexdigest()}"

        async def parts() -> AsyncIterator[bytes]:
            for i in range(40):
                yield bytes([i]) * 50_000

        streamed = b"".join(bytes([i]) * 50_000 for i in range(40))
        reply = await http.post("/echo", content=parts())  # no length: sent chunked
        assert reply.text == f"{len(streamed)} {hashlib.sha256(streamed).hexdigest()}"
        assert pool(http).connections == 1


async def test_a_long_reply_reaches_a_slow_reader_intact(tmp_path: Path) -> None:
    count = 4 * HIGH_WATER // 65536 + 3  # well past the point where reading pauses
    async with serving(tmp_path, App()) as path, client(path) as http:
        async with http.stream("GET", "/stream", params={"n": count}) as response:
            seen = bytearray()
            async for chunk in response.aiter_raw():
                seen += chunk
                await anyio.sleep(0.001)
        assert bytes(seen) == b"".join(bytes([i % 256]) * 65536 for i in range(count))
        assert (await http.post("/echo", content=b"again")).status_code == 200
        assert pool(http).connections == 1


async def read_whole(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> bytes:
    """A request handed to the transport itself, its reply read whole, as the proxy does."""
    response = await pool(http).handle_async_request(http.build_request(method, url, **kwargs))
    try:
        assert isinstance(response.stream, EngineBody)
        return await response.stream.read()
    finally:
        await response.aclose()


async def test_a_reply_read_whole_is_the_reply_streamed_with_no_read_timeout(tmp_path: Path) -> None:
    """As the proxy calls: no read timeout (no timer is set) and a reply of known length read whole."""
    count = 4 * HIGH_WATER // 65536 + 3  # reading pauses and resumes on the way
    as_the_proxy = httpx.Timeout(5.0, read=None)
    async with serving(tmp_path, App()) as path, client(path, timeout=as_the_proxy) as http:
        streamed = b"".join(bytes([i % 256]) * 65536 for i in range(count))
        assert await read_whole(http, "GET", "/stream", params={"n": count}) == streamed
        assert await read_whole(http, "POST", "/echo", content=b"one") == (
            f"3 {hashlib.sha256(b'one').hexdigest()}".encode()
        )
        assert await read_whole(http, "GET", "/slow") == b"late"  # no read timeout: it waits
        with pytest.raises(httpx.ReadError):
            await read_whole(http, "GET", "/broken")
        with anyio.move_on_after(0.2):  # a caller cancelled while waiting, with no timer set
            await read_whole(http, "GET", "/slow")
        assert pool(http).connections == 0
        assert await read_whole(http, "POST", "/echo", content=b"ok") == (
            f"2 {hashlib.sha256(b'ok').hexdigest()}".encode()
        )
        assert pool(http).connections == 1


async def test_closing_a_reply_never_waits_and_ends_the_call(tmp_path: Path) -> None:
    """The proxy closes the engine's replies with no cancel shield: closing must not suspend."""
    app = App()
    async with serving(tmp_path, app) as path, client(path) as http:
        response = await pool(http).handle_async_request(http.build_request("GET", "/held"))
        assert isinstance(response.stream, EngineBody)
        closing = response.aclose()
        with pytest.raises(StopIteration):
            closing.send(None)  # ran to its end without giving the event loop a turn
        assert pool(http).connections == 0  # not read to its end: closed, so the engine sees it
        with anyio.fail_after(10):
            await app.left.wait()


@pytest.mark.req("perf:gateway")
async def test_a_call_sent_without_an_httpx_request_is_the_same_bytes(tmp_path: Path) -> None:
    """The proxy's calls go out through ``send_call``: byte for byte what the ``httpx.Request``
    of the same call sends, and the reply reads the same."""
    path, seen, done = str(tmp_path / "raw.sock"), [], asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                fields = (line.partition(b": ") for line in head.split(b"\r\n"))
                length = next((int(v) for k, _, v in fields if k == b"content-length"), 0)
                seen.append(head + await reader.readexactly(length))
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
                )
                await writer.drain()
        except asyncio.IncompleteReadError:  # the client closed the connection
            pass
        finally:
            writer.close()
            done.set()

    server = await asyncio.start_unix_server(answer, path)
    transport = EngineTransport(path, max_connections=1, keepalive_expiry=30.0)
    try:
        headers = [(b"accept", b"application/json, text/event-stream"), (b"host", b"localhost")]
        for method, body in (
            ("POST", b'{"jsonrpc":"2.0","id":1}'),
            ("POST", b""),
            ("GET", b""),
            ("DELETE", b""),
        ):
            replies = []
            for plain in (False, True):
                response = await (
                    transport.send_call(engine_call(method, headers, body))
                    if plain
                    else transport.handle_async_request(engine_request(method, headers, body))
                )
                assert isinstance(response.stream, EngineBody)
                replies.append((response.status_code, response.headers.raw, await response.stream.read()))
                await response.aclose()
            assert replies[0] == replies[1] == (200, replies[0][1], b"{}")
            assert seen[-2] == seen[-1], method
        assert seen[0].startswith(b"POST /mcp HTTP/1.1\r\naccept: ") and seen[0].endswith(
            b'{"jsonrpc":"2.0","id":1}'
        )
        assert transport.connections == 1
    finally:
        await transport.aclose()
        with anyio.fail_after(10):
            await done.wait()
        server.close()
        await server.wait_closed()


async def test_a_connection_the_engine_closed_while_idle_is_replaced(tmp_path: Path) -> None:
    async with serving(tmp_path, App(), keep_alive=0.1) as path, client(path) as http:
        assert (await http.post("/echo", content=b"one")).status_code == 200
        with anyio.fail_after(10):
            while pool(http).connections:  # the engine drops it after its keep-alive
                await anyio.sleep(0.02)
        assert (await http.post("/echo", content=b"two")).text.startswith("3 ")
        assert pool(http).connections == 1


async def test_a_reply_cut_short_is_a_transport_error_and_the_next_call_works(tmp_path: Path) -> None:
    async with serving(tmp_path, App()) as path, client(path) as http:
        with pytest.raises(httpx.ReadError):
            await http.get("/broken")
        assert (await http.post("/echo", content=b"ok")).status_code == 200


async def test_no_engine_is_a_connect_error(tmp_path: Path) -> None:
    async with client(str(tmp_path / "nobody.sock")) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get("/healthz")


async def test_a_late_answer_meets_the_read_timeout(tmp_path: Path) -> None:
    async with serving(tmp_path, App()) as path, client(path, timeout=httpx.Timeout(5.0, read=0.2)) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/slow")
        assert (await http.post("/echo", content=b"ok")).status_code == 200


async def test_a_busy_pool_makes_the_next_call_wait_then_time_out(tmp_path: Path) -> None:
    app = App()
    timeout = httpx.Timeout(5.0, pool=0.2)
    async with serving(tmp_path, app) as path, client(path, max_connections=1, timeout=timeout) as http:
        async with http.stream("GET", "/held") as held:
            assert await held.aiter_raw().__anext__() == b"first"
            with pytest.raises(httpx.PoolTimeout):
                await http.get("/echo")
        # closed before its end: the connection is closed, so the engine sees the caller leave
        with anyio.fail_after(10):
            await app.left.wait()
        assert (await http.post("/echo", content=b"ok")).status_code == 200


@pytest.mark.req("perf:gateway", "rel:load")
async def test_a_slow_call_holds_up_no_other_call_to_the_same_engine(tmp_path: Path) -> None:
    """No head-of-line blocking: a call still running holds its own connection only; calls made
    meanwhile, one after another and side by side, each get a connection and are answered."""
    app = App()
    answered: list[int] = []
    async with (
        serving(tmp_path, app) as path,
        client(path, max_connections=4) as http,
        http.stream("GET", "/held") as held,
    ):
        assert await held.aiter_raw().__anext__() == b"first"  # under way, and it stays so

        async def echo() -> None:
            answered.append((await http.post("/echo", content=b"ok")).status_code)

        with anyio.fail_after(10):
            await echo()
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(echo)
        assert answered == [200] * 4
        assert not app.left.is_set()  # the slow call is still being answered
        assert 2 <= pool(http).connections <= 4  # the held one and the others'


async def test_a_caller_cancelled_while_waiting_closes_its_connection(tmp_path: Path) -> None:
    app = App()
    async with serving(tmp_path, app) as path, client(path) as http:
        with anyio.move_on_after(0.2):
            await http.get("/slow")
        assert pool(http).connections == 0
        assert (await http.post("/echo", content=b"ok")).status_code == 200


async def test_an_idle_connection_is_reused_only_within_its_expiry(tmp_path: Path) -> None:
    now = [0.0]
    async with serving(tmp_path, App()) as path:
        transport = EngineTransport(path, max_connections=4, keepalive_expiry=30.0, clock=lambda: now[0])
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            await http.post("/echo", content=b"one")
            (first,) = transport._open
            now[0] = 29.0
            await http.post("/echo", content=b"two")
            assert transport._open == {first}  # reused
            now[0] = 29.0 + 30.0
            await http.post("/echo", content=b"three")
            assert first.closed and transport.connections == 1  # expired: closed, a new one opened
