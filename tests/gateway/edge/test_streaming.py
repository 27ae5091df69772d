"""Streaming through a real HTTP server: no buffering, and a client that leaves cancels upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from gateway import headers as hdr
from gateway.control.records import Principal
from gateway.control.store import ControlPlane
from gateway.edge.proxy import McpProxy
from gateway.metrics import Metrics
from gateway.ratelimit import RateLimiter
from tests.gateway.inproc import serving
from tests.gateway.mocks import Handler, MockEngines

pytestmark = pytest.mark.anyio


class Gated(httpx.AsyncByteStream):
    """An SSE body: the first event, then the rest only once ``release`` is set."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.closed = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'event: message\ndata: {"n": 1}\n\n'
        await self.release.wait()
        yield b'event: message\ndata: {"n": 2}\n\n'

    async def aclose(self) -> None:
        self.closed.set()


def _proxy(store: ControlPlane, handler: Handler) -> McpProxy:
    return McpProxy(
        store=store,
        supervisor=MockEngines(handler),
        origin_policy=hdr.OriginPolicy(None, frozenset(), frozenset(), loopback=True),
        limiter=RateLimiter(rate=100.0, burst=100),
        metrics=Metrics(),
        max_body_bytes=1 << 20,
        retry_after=5,
    )


def _app(tmp_path: Path, handler: Handler) -> tuple[Starlette, str]:
    store = ControlPlane.open(tmp_path / "control.db")
    owner, ws = store.owners.create("ada@example.com", None)
    _, token = store.connections.create_pat(owner.id, ws.id, "laptop")
    return Starlette(routes=[Route("/mcp", _proxy(store, handler))]), token


class _Hanging:
    """An engine that never answers: ``started`` once a request reached it, ``ended`` once the
    proxy gave up waiting for it (the request was cancelled)."""

    def __init__(self) -> None:
        self.started, self.ended = anyio.Event(), anyio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.ended.set()
        raise AssertionError("unreachable")  # pragma: no cover


def _sse(stream: httpx.AsyncByteStream) -> httpx.Response:
    return httpx.Response(200, stream=stream, headers={"content-type": "text/event-stream"})


@pytest.mark.req("gw:route")
async def test_sse_is_relayed_event_by_event(tmp_path: Path) -> None:
    body = Gated()
    app, token = _app(tmp_path, lambda request: _sse(body))
    async with serving(app) as base, httpx.AsyncClient(timeout=5) as client:
        with anyio.fail_after(10):
            async with client.stream(
                "POST", base + "/mcp", json={}, headers={"Authorization": f"Bearer {token}"}
            ) as response:
                assert response.headers["content-type"] == "text/event-stream"
                assert response.headers["x-accel-buffering"] == "no"
                chunks = response.aiter_raw()
                first = await anext(chunks)  # arrives while the engine still holds the second back
                assert b'"n": 1' in first
                body.release.set()
                rest = b"".join([chunk async for chunk in chunks])
                assert b'"n": 2' in rest


@pytest.mark.req("gw:route")
async def test_a_client_leaving_mid_stream_closes_the_upstream_stream(tmp_path: Path) -> None:
    body = Gated()
    app, token = _app(tmp_path, lambda request: _sse(body))
    async with serving(app) as base, httpx.AsyncClient(timeout=5) as client:
        with anyio.fail_after(10):
            async with client.stream(
                "POST", base + "/mcp", json={}, headers={"Authorization": f"Bearer {token}"}
            ) as response:
                await anext(response.aiter_raw())
            await body.closed.wait()


@pytest.mark.req("gw:route")
async def test_a_client_leaving_before_the_headers_cancels_the_upstream_request(tmp_path: Path) -> None:
    slow = _Hanging()
    app, token = _app(tmp_path, slow)
    async with serving(app) as base, httpx.AsyncClient(timeout=5) as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.post(base + "/mcp", json={}, headers={"Authorization": f"Bearer {token}"})

                tg.start_soon(call)
                await slow.started.wait()
                tg.cancel_scope.cancel()
            await slow.ended.wait()


@pytest.mark.req("gw:route")
async def test_a_cancellation_not_from_the_client_is_not_swallowed(tmp_path: Path) -> None:
    """The proxy swallows only the cancellation its own watch made (the client left); one from
    around the call (an engine stopping under a stream's lease, a shutdown) goes on out."""
    slow = _Hanging()

    proxy = _proxy(ControlPlane.open(tmp_path / "control.db"), slow)
    principal = Principal("own", "ws", "conn", "laptop", read_only=False, scope=None)
    client_stays = anyio.Event()  # never set: the client does not leave

    async def receive() -> dict[str, object]:
        await client_stays.wait()
        return {"type": "http.disconnect"}  # pragma: no cover

    async def send(message: object) -> None:  # pragma: no cover - nothing is answered
        raise AssertionError(f"nothing should be sent: {message}")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as around:

                async def cancel_once_started() -> None:
                    await slow.started.wait()
                    around.cancel()

                tg.start_soon(cancel_once_started)
                await proxy.serve_local("POST", [(b"host", b"localhost")], b"{}", principal, receive, send)
                raise AssertionError("the cancellation was swallowed")  # pragma: no cover
        assert around.cancelled_caught
        await slow.ended.wait()
