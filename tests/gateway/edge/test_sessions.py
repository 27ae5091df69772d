"""2025-era sessions outlive the engine process serving them (gateway.edge.sessions): end to end with
the real gateway, real engine processes and the real ``mcp`` client, and against an engine stand-in
over ``httpx.MockTransport`` for what a real engine does only rarely (forget a session while it
runs, refuse to open one)."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import LoggingMessageNotificationParams
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from gateway import headers as hdr
from gateway.control.store import ControlPlane
from gateway.edge.proxy import McpProxy
from gateway.edge.sessions import MAX_KEPT_BODY, MAX_SESSIONS, Session, Sessions, is_request, kept
from gateway.metrics import Metrics
from gateway.ratelimit import RateLimiter
from tests.gateway.e2e import Gateway, alive, data, start_gateway, wait_for
from tests.gateway.mocks import MockEngines


def _fact(subject: str, obj: str) -> dict[str, object]:
    return {"statement": f"{subject} is {obj}", "subject": subject, "predicate": "is", "object": obj}


def _asleep(gw: Gateway, workspace: Path) -> None:
    """Wait until the workspace's engine has been stopped as idle."""
    pid = gw.engines()[workspace]
    wait_for(lambda: not alive(pid) and workspace not in gw.engines(), what="the idle engine to stop")


@pytest.mark.req("gw:spawn", "rel:load")
@pytest.mark.anyio
@pytest.mark.slow
async def test_a_client_that_fell_back_to_a_session_during_a_slow_start_keeps_it_across_sleeps(
    tmp_path: Path,
) -> None:
    """The row of ``bench.load`` where workspaces sleep and wake, made deterministic: a workspace's
    engine takes longer to start than the ``mcp`` client waits for its ``server/discover`` probe
    (10 s), so the client falls back to a 2025-era session, opened on that engine. The engine then
    sleeps and wakes twice: every call after each wake is answered, on the client's same session.
    (Before, the first call after a sleep failed with "Session not found".)

    The start is held back by a wrapper that starts the real engine only once a gate file exists;
    the test opens the gate when it sees the client send ``initialize``, that is once the probe has
    timed out."""
    gate = tmp_path / "gate"
    wrapper = tmp_path / "engine.sh"
    wrapper.write_text(
        f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.02; done\nexec {sys.executable} -m engine "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    gw = start_gateway(
        tmp_path / "data",
        tmp_path / "gateway.log",
        engine_command=str(wrapper),
        engine_warm_spare="false",
        engine_idle_timeout="0.5",
        engine_start_timeout="120",
    )
    try:
        gw.owner("ivy@example.com")
        token = gw.token("ivy@example.com", "ivy")
        workspace = gw.workspace_dir("ivy@example.com")
        sent: list[str] = []

        async def opened_gate(request: httpx2.Request) -> None:
            method = json.loads(request.content).get("method") if request.method == "POST" else None
            sent.append(str(method))
            if method == "initialize":
                gate.touch()

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=120, event_hooks={"request": [opened_gate]}
        )
        async with http, Client(streamable_http_client(gw.mcp_url, http_client=http)) as client:
            assert sent[:2] == ["server/discover", "initialize"]  # the probe timed out: a 2025-era session
            assert client.session.initialize_result is not None
            saved = data(await client.call_tool("remember", _fact("Sleep", "well")))
            for _ in range(2):
                _asleep(gw, workspace)
                found = data(await client.call_tool("retrieve_memory", {"id": saved["id"]}))
                assert found["facts"][0]["object"] == "well"
            assert "initialize" not in sent[2:]  # the client never had to open a new session
        assert gw.metric("almanac_sessions_reopened_total") >= 2
        assert gw.metric('almanac_engine_stops_total{reason="idle"}') >= 2
    finally:
        gw.stop()


@pytest.mark.req("gw:spawn", "gw:route", "engine:idle")
@pytest.mark.anyio
@pytest.mark.slow
async def test_a_legacy_session_survives_an_idle_stop_and_a_crash_with_its_log_level(tmp_path: Path) -> None:
    """A client on a 2025-era session chooses a log level, then calls across an idle stop and a
    crash of its workspace's engine: every call is answered on its same session, and each new
    engine sends it the info-level logs it asked for (the level is set again there)."""
    gw = start_gateway(
        tmp_path / "data", tmp_path / "gateway.log", engine_idle_timeout="0.5", restart_backoff_initial="0.1"
    )
    try:
        gw.owner("jo@example.com")
        token = gw.token("jo@example.com", "jo")
        workspace = gw.workspace_dir("jo@example.com")
        logged: list[str] = []

        async def on_log(params: LoggingMessageNotificationParams) -> None:
            logged.append(str(params.data))

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        transport = streamable_http_client(gw.mcp_url, http_client=http)
        async with http, Client(transport, mode="legacy", logging_callback=on_log) as client:
            with warnings.catch_warnings():  # logging is deprecated by 2026-07-28, still 2025's way
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("info")
            first = data(await client.call_tool("remember", _fact("Tide", "high")))
            _asleep(gw, workspace)
            second = data(await client.call_tool("remember", _fact("Moon", "full")))
            os.kill(gw.engines()[workspace], signal.SIGKILL)
            wait_for(lambda: gw.metric("almanac_engine_crashes_total") >= 1, what="the crash to be seen")
            third = data(await client.call_tool("remember", _fact("Wind", "west")))
            found = data(await client.call_tool("retrieve_memory", {"id": first["id"]}))
            assert found["facts"][0]["object"] == "high"
        for receipt in (first, second, third):
            assert any(receipt["id"] in said for said in logged), (receipt["id"], logged)
        assert gw.metric("almanac_sessions_reopened_total") >= 2
    finally:
        gw.stop()


class FakeEngine:
    """The engine's side of 2025-era sessions: ``initialize`` opens one, a request under an id it
    does not hold gets the SDK's 404 "Session not found", a notification 202, DELETE ends one."""

    def __init__(self) -> None:
        self.sessions: set[str] = set()
        self.opened = 0
        self.refuse_initialize = False
        self.seen: list[tuple[str, str | None]] = []  # (JSON-RPC method or HTTP method, session id)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content) if request.content else {}
        session_id = request.headers.get("mcp-session-id")
        self.seen.append((message.get("method", request.method), session_id))
        if session_id is None:
            if self.refuse_initialize:
                return httpx.Response(500, json={"error": "not now"})
            self.opened += 1
            session_id = f"e-{self.opened}"
            self.sessions.add(session_id)
        elif session_id not in self.sessions:
            error = {"code": -32600, "message": "Session not found"}
            return httpx.Response(404, json={"jsonrpc": "2.0", "id": None, "error": error})
        elif request.method == "DELETE":
            self.sessions.discard(session_id)
        if "id" not in message and request.method == "POST":
            return httpx.Response(202, headers={"mcp-session-id": session_id})
        reply: dict[str, object] = {"jsonrpc": "2.0", "id": message.get("id"), "result": {}}
        return httpx.Response(200, json=reply, headers={"mcp-session-id": session_id})


@dataclass
class Edge:
    client: TestClient
    engine: FakeEngine
    engines: MockEngines
    proxy: McpProxy
    metrics: Metrics
    auth: dict[str, str]

    def post(self, message: dict[str, object], session_id: str | None = None) -> httpx2.Response:
        headers = {**self.auth, "Mcp-Protocol-Version": "2025-11-25"}
        if session_id is not None:
            headers["Mcp-Session-Id"] = session_id
        return self.client.post("/mcp", json=message, headers=headers)

    def restart(self) -> None:
        """The workspace's engine process is replaced: it holds no session."""
        self.engines.slot.generation += 1
        self.engine.sessions.clear()


INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
SET_LEVEL = {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "info"}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_context", "arguments": {}}}


@pytest.fixture
def edge(tmp_path: Path) -> Edge:
    store = ControlPlane.open(tmp_path / "control.db")
    owner, ws = store.owners.create("kim@example.com", None)
    _, token = store.connections.create_pat(owner.id, ws.id, "kim")
    engine = FakeEngine()
    engines = MockEngines(engine)
    metrics = Metrics()
    proxy = McpProxy(
        store=store,
        supervisor=engines,
        origin_policy=hdr.OriginPolicy(None, frozenset(), frozenset({"testserver"}), loopback=True),
        limiter=RateLimiter(rate=1000.0, burst=1000),
        metrics=metrics,
        max_body_bytes=64 * 1024,
        retry_after=5,
    )
    client = TestClient(Starlette(routes=[Route("/mcp", proxy)]))
    return Edge(client, engine, engines, proxy, metrics, {"Authorization": f"Bearer {token}"})


def _opened(edge: Edge) -> str:
    r = edge.post(INITIALIZE)
    assert r.status_code == 200
    session_id = r.headers["mcp-session-id"]
    assert edge.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id).status_code == 202
    return session_id


@pytest.mark.req("gw:route", "gw:spawn")
def test_a_kept_session_is_opened_again_on_a_new_engine_under_the_clients_id(edge: Edge) -> None:
    session_id = _opened(edge)
    assert edge.post(SET_LEVEL, session_id).status_code == 200
    edge.restart()
    edge.engine.seen.clear()
    r = edge.post(CALL, session_id)
    assert r.status_code == 200 and r.json()["id"] == 2
    assert r.headers["mcp-session-id"] == session_id  # the client's id, not the new engine's
    assert edge.engine.seen == [
        ("initialize", None),
        ("notifications/initialized", "e-2"),
        ("logging/setLevel", "e-2"),
        ("tools/call", "e-2"),
    ]
    assert edge.post(CALL, session_id).status_code == 200  # now held: nothing opened again
    assert edge.engine.opened == 2
    assert b"almanac_sessions_reopened_total 1.0" in edge.metrics.render()


@pytest.mark.req("gw:route")
def test_an_engine_that_forgot_a_session_gets_it_back_and_the_refused_call_is_sent_again(edge: Edge) -> None:
    session_id = _opened(edge)
    edge.engine.sessions.clear()  # the same engine process ended the session (its own idle expiry)
    edge.engine.seen.clear()
    r = edge.post(CALL, session_id)
    assert r.status_code == 200 and r.headers["mcp-session-id"] == session_id
    assert [m for m, _ in edge.engine.seen] == [
        "tools/call",
        "initialize",
        "notifications/initialized",
        "tools/call",
    ]
    assert edge.engine.seen[0][1] == session_id and edge.engine.seen[-1][1] == "e-2"


@pytest.mark.req("gw:route", "gw:503")
def test_a_session_the_engine_will_not_take_back_gets_503_and_is_kept_for_the_retry(edge: Edge) -> None:
    session_id = _opened(edge)
    edge.restart()
    edge.engine.refuse_initialize = True
    r = edge.post(CALL, session_id)
    assert r.status_code == 503 and r.json()["error"]["code"] == "engine_unreachable"
    assert "take this session back" in r.json()["error"]["message"] and r.headers["retry-after"] == "5"
    assert ("tools/call", "e-1") not in edge.engine.seen[2:]  # the call itself was not sent
    edge.engine.refuse_initialize = False
    r = edge.post(CALL, session_id)
    assert r.status_code == 200 and r.headers["mcp-session-id"] == session_id


@pytest.mark.req("gw:route", "engine:idle")
def test_while_asleep_a_kept_session_gets_405_on_get_and_a_delete_ends_it_here(edge: Edge) -> None:
    session_id = _opened(edge)
    edge.engines.running = False
    leases = len(edge.engines.leases)
    r = edge.client.get("/mcp", headers={**edge.auth, "Mcp-Session-Id": session_id})
    assert r.status_code == 405 and r.headers["allow"] == "POST, DELETE"
    assert "session is kept" in r.json()["error"]["message"]
    r = edge.client.delete("/mcp", headers={**edge.auth, "Mcp-Session-Id": session_id})
    assert r.status_code == 200
    r = edge.client.get("/mcp", headers={**edge.auth, "Mcp-Session-Id": session_id})
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    assert len(edge.engines.leases) == leases  # nothing woke the engine


@pytest.mark.req("gw:route")
def test_kept_sessions_are_bounded_per_workspace() -> None:
    sessions = Sessions(limit=2)
    for n in range(3):
        sessions.opened("ws", f"s{n}", Session("c", f"s{n}", 1, b"{}"))
    assert sessions.get("ws", "s0") is None and sessions.count("ws") == 2
    assert sessions.get("ws", "s1") is not None  # used: now the most recent
    sessions.opened("ws", "s3", Session("c", "s3", 1, b"{}"))
    assert sessions.get("ws", "s2") is None and sessions.get("ws", "s1") is not None
    # the figures docs/wire.md states
    assert MAX_SESSIONS == 10_000 and MAX_KEPT_BODY == 4 * 1024
    assert kept(b"x" * MAX_KEPT_BODY) is not None and kept(b"x" * (MAX_KEPT_BODY + 1)) is None
    assert is_request(json.dumps(INITIALIZE).encode(), "initialize")
    assert not is_request(b'{"method": "initialize"}', "initialize")  # a notification is no request
