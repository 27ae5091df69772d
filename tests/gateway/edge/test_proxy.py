"""The /mcp proxy against an engine client over ``httpx.MockTransport`` (gw:route, gw:503)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway import headers as hdr
from gateway.control.store import ControlPlane
from gateway.edge.proxy import McpProxy
from gateway.errors import EngineStartFailed
from gateway.metrics import Metrics
from gateway.ratelimit import RateLimiter
from tests.gateway.mocks import Chunks, MockEngines


@dataclass
class Setup:
    client: TestClient
    engines: MockEngines
    store: ControlPlane
    metrics: Metrics
    seen: list[httpx.Request]
    token: str
    owner_id: str
    proxy: McpProxy
    workspace_id: str


def _json_ok(request: httpx.Request) -> httpx.Response:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
    return httpx.Response(
        200,
        stream=Chunks(body[:10], body[10:]),
        headers={
            "content-type": "application/json",
            "mcp-session-id": "s-1",
            "set-cookie": "x=y",
            "x-internal": "1",
        },
    )


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    store = ControlPlane.open(tmp_path / "control.db")
    owner, ws = store.owners.create("ada@example.com", None)
    _, token = store.connections.create_pat(owner.id, ws.id, "Claude on laptop", scope="project:fjord")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _json_ok(request)

    engines = MockEngines(handler)
    metrics = Metrics()
    proxy = McpProxy(
        store=store,
        supervisor=engines,
        origin_policy=hdr.OriginPolicy(None, frozenset(), frozenset({"testserver"}), loopback=True),
        limiter=RateLimiter(rate=1.0, burst=5),
        metrics=metrics,
        max_body_bytes=2048,
        retry_after=5,
    )
    app = Starlette(routes=[Route("/mcp", proxy)])
    return Setup(TestClient(app), engines, store, metrics, seen, token, owner.id, proxy, ws.id)


def _auth(s: Setup, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {s.token}", **extra}


BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.mark.req("gw:route")
def test_forwards_with_identity_and_without_the_token(setup: Setup) -> None:
    r = setup.client.post(
        "/mcp",
        json=BODY,
        headers=_auth(setup, **{"X-Almanac-Read-Only": "0", "Accept": "application/json, text/event-stream"}),
    )
    assert r.status_code == 200 and r.json()["result"] == {}
    assert r.headers["mcp-session-id"] == "s-1"
    assert "set-cookie" not in r.headers and "x-internal" not in r.headers
    (upstream,) = setup.seen
    assert upstream.url.path == "/mcp" and json.loads(upstream.content) == BODY
    assert "authorization" not in upstream.headers
    assert upstream.headers["x-almanac-connection"] == "Claude%20on%20laptop"
    assert upstream.headers["x-almanac-read-only"] == "0"
    assert upstream.headers["x-almanac-scope"] == "project:fjord"
    assert upstream.headers["accept"] == "application/json, text/event-stream"
    connection = setup.store.connections.of_owner(setup.owner_id)[0].id
    session = setup.proxy.sessions.get(setup.workspace_id, "s-1")
    assert session is not None and session.connection_id == connection and session.engine_id == "s-1"
    assert not session.resumable  # opened by something other than initialize: not kept past its engine


@pytest.mark.req("gw:route", "gw:ops")
def test_401_points_at_the_resource_metadata_and_denials_are_audited(setup: Setup) -> None:
    r = setup.client.post("/mcp", json=BODY)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == (
        'Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp", '
        'scope="memory"'
    )
    assert r.json()["error"]["code"] == "invalid_token"
    setup.store.connections.revoke(setup.owner_id, "Claude on laptop")
    r = setup.client.post("/mcp", json=BODY, headers=_auth(setup))
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    assert setup.seen == [] and setup.engines.leases == []
    assert setup.store.audit_log.events(limit=1)[0].kind == "auth.denied"
    assert b'almanac_auth_failures_total{code="invalid_token"} 2.0' in setup.metrics.render()


@pytest.mark.req("gw:route", "gw:signin")
def test_401_tells_both_ways_in_and_what_is_wrong_with_the_header(setup: Setup) -> None:
    messages = {}
    for header in (None, setup.token, f"Token {setup.token}", "Bearer "):
        headers = {} if header is None else {"Authorization": header}
        r = setup.client.post("/mcp", json=BODY, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_token"
        messages[header] = r.json()["error"]["message"]
    for message in messages.values():
        assert "add http://testserver/mcp to an MCP client that signs in" in message
        assert "create a personal access token" in message and "'Authorization: Bearer <token>'" in message
    assert messages[None].startswith("this endpoint needs a bearer token")
    assert messages[setup.token].startswith(
        "the Authorization header must be 'Bearer <token>': put the word 'Bearer' and a space before"
    )
    assert messages[f"Token {setup.token}"].startswith("the Authorization header uses the 'Token' scheme")
    assert setup.seen == []


@pytest.mark.req("gw:route")
def test_origin_host_method_and_size_are_checked_before_anything_is_forwarded(setup: Setup) -> None:
    c = setup.client
    r = c.post("/mcp", json=BODY, headers=_auth(setup, Origin="http://evil.example"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
    assert setup.store.audit_log.events(limit=1)[0].kind == "origin.denied"
    assert c.post("/mcp", json=BODY, headers=_auth(setup, Origin="http://testserver")).status_code == 200
    r = c.post("/mcp", json=BODY, headers=_auth(setup, Host="evil.example"))
    assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed"
    r = c.put("/mcp", json=BODY, headers=_auth(setup))
    assert r.status_code == 405 and r.headers["allow"] == "POST, GET, DELETE"
    r = c.post("/mcp", content=b"x" * 4096, headers=_auth(setup))
    assert r.status_code == 413
    r = c.post("/mcp", content=iter([b"x" * 1500, b"x" * 1500]), headers=_auth(setup))  # chunked, no length
    assert r.status_code == 413
    assert len(setup.seen) == 1


@pytest.mark.req("gw:route")
def test_rate_limit_per_connection(setup: Setup) -> None:
    codes = [setup.client.post("/mcp", json=BODY, headers=_auth(setup)).status_code for _ in range(7)]
    assert codes[:5] == [200] * 5 and codes[5:] == [429, 429]
    r = setup.client.post("/mcp", json=BODY, headers=_auth(setup))
    assert r.headers["retry-after"] == "1" and r.json()["error"]["code"] == "rate_limited"
    assert len(setup.seen) == 5


@pytest.mark.req("gw:503", "gw:ops")
def test_an_engine_that_cannot_start_gets_503_and_nothing_is_forwarded(setup: Setup) -> None:
    setup.engines.fail = EngineStartFailed("the engine could not start", retry_after=7)
    r = setup.client.post("/mcp", json=BODY, headers=_auth(setup))
    assert r.status_code == 503 and r.headers["retry-after"] == "7"
    assert r.json() == {"error": {"code": "engine_start_failed", "message": "the engine could not start"}}
    assert setup.seen == []
    assert b'almanac_unavailable_total{code="engine_start_failed"} 1.0' in setup.metrics.render()


@pytest.mark.req("gw:503")
def test_an_engine_that_went_away_is_503(setup: Setup) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no socket", request=request)

    setup.engines.handler = refuse
    r = setup.client.post("/mcp", json=BODY, headers=_auth(setup))
    assert r.status_code == 503 and r.json()["error"]["code"] == "engine_unreachable"
    assert "retry-after" in r.headers


class CutShort(Chunks):
    """A body whose connection breaks after its first piece."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.chunks[0]
        raise httpx.ReadError("the engine went away mid-reply")


@pytest.mark.req("gw:route", "perf:gateway")
def test_a_reply_of_known_length_goes_out_whole_with_its_length(setup: Setup) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"notes": ["fjord"] * 50}}).encode()
    length = {"content-type": "application/json", "content-length": str(len(body))}
    setup.engines.handler = lambda request: httpx.Response(
        200, stream=Chunks(body[:7], body[7:]), headers=length
    )
    r = setup.client.post("/mcp", json=BODY, headers=_auth(setup))
    assert r.status_code == 200 and r.content == body
    assert r.headers["content-length"] == str(len(body)) and "transfer-encoding" not in r.headers
    setup.engines.handler = lambda request: httpx.Response(200, stream=CutShort(body[:7]), headers=length)
    r = setup.client.post("/mcp", json=BODY, headers=_auth(setup))
    assert r.status_code == 503 and r.json()["error"]["code"] == "engine_unreachable"


@pytest.mark.req("gw:route", "engine:idle")
def test_get_and_delete_never_wake_a_sleeping_engine(setup: Setup) -> None:
    setup.engines.running = False
    r = setup.client.get("/mcp", headers=_auth(setup, **{"Mcp-Session-Id": "old"}))
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    r = setup.client.delete("/mcp", headers=_auth(setup, **{"Mcp-Session-Id": "old"}))
    assert r.status_code == 404
    r = setup.client.get("/mcp", headers=_auth(setup))
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert setup.engines.leases == [] and setup.seen == []
    setup.engines.running = True
    assert setup.client.delete("/mcp", headers=_auth(setup, **{"Mcp-Session-Id": "s"})).status_code == 200
    assert setup.client.get("/mcp", headers=_auth(setup, **{"Mcp-Session-Id": "s"})).status_code == 200
    assert setup.engines.leases == [True, False]  # a GET stream does not keep the engine awake


@pytest.mark.req("gw:route", "gw:isolation")
def test_a_session_is_honoured_only_for_the_connection_that_opened_it(setup: Setup) -> None:
    assert setup.client.post("/mcp", json=BODY, headers=_auth(setup)).status_code == 200
    owner = setup.store.owners.by_email("ada@example.com")
    ws = setup.store.owners.workspaces(owner.id)[0]
    _, reader = setup.store.connections.create_pat(owner.id, ws.id, "reader", read_only=True)
    r = setup.client.post(
        "/mcp", json=BODY, headers={"Authorization": f"Bearer {reader}", "Mcp-Session-Id": "s-1"}
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    assert len(setup.seen) == 1
    r = setup.client.post("/mcp", json=BODY, headers=_auth(setup, **{"Mcp-Session-Id": "s-1"}))
    assert r.status_code == 200


@pytest.mark.req("gw:ops")
def test_requests_and_latency_are_counted(setup: Setup) -> None:
    setup.client.post("/mcp", json=BODY, headers=_auth(setup))
    text = setup.metrics.render().decode()
    assert 'almanac_requests_total{method="POST",status="200"} 1.0' in text
    assert 'almanac_request_seconds_count{method="POST"} 1.0' in text


async def test_anyio_marker_smoke() -> None:  # keeps the anyio plugin honest under --strict-markers
    await anyio.sleep(0)


test_anyio_marker_smoke = pytest.mark.anyio(test_anyio_marker_smoke)
