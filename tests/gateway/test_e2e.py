"""End to end: the real gateway (port 0), real engines, the real MCP client with bearer tokens."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import ENGINE
from tests.gateway.e2e import (
    Gateway,
    alive,
    children,
    cmdline,
    connect,
    data,
    files_containing,
    refusal,
    start_gateway,
    wait_for,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("gw")
    gw = start_gateway(root / "data", root / "gateway.log", restart_backoff_initial="0.1")
    yield gw
    gw.stop()


def _fact(subject: str, obj: str, **extra: object) -> dict[str, object]:
    return {"statement": f"{subject} is {obj}", "subject": subject, "predicate": "is", "object": obj, **extra}


@pytest.mark.req("run:cli")
def test_serve_prints_the_mcp_url_and_how_to_get_a_token(gateway: Gateway) -> None:
    port = int(gateway.url.rsplit(":", 1)[1])
    assert port > 0
    assert re.fullmatch(
        rf"Almanac \S+ is serving MCP at http://127\.0\.0\.1:{port}/mcp", gateway.banner[0].strip()
    )
    text = "".join(gateway.banner)
    assert "almanac owner create" in text and "almanac token create" in text
    assert f"claude mcp add --transport http almanac {gateway.url}/mcp --header" in text
    assert f"Sign up in a browser at {gateway.url}/signup" in text  # sign-up is open by default


@pytest.mark.req("gw:isolation", "gw:route")
async def test_two_owners_workspaces_are_isolated(gateway: Gateway) -> None:
    gateway.owner("ada@example.com")
    gateway.owner("bob@example.com")
    gateway.cli("workspace", "create", "research", "--owner", "ada@example.com")
    ada = gateway.token("ada@example.com", "Ada's laptop")
    ada_research = gateway.token("ada@example.com", "Ada research", "--workspace", "research")
    bob = gateway.token("bob@example.com", "Bob's agent")

    async with connect(gateway, ada) as a:
        fact = data(await a.call_tool("remember", _fact("Fjord", "ada-secret-value")))
        assert (fact["action"], fact["source"], fact["source_verified"]) == ("store", "Ada's laptop", True)
        note = data(await a.call_tool("remember", {"statement": "ada-secret-note about the fjord"}))
        log = data(await a.call_tool("remember_note", {"text": "ada-secret-log line"}))
    ada_ids = [fact["id"], note["id"], log["id"]]

    for other in (bob, ada_research):
        async with connect(gateway, other) as b:
            for memory_id in ada_ids:
                refusal(await b.call_tool("retrieve_memory", {"id": memory_id}))
                refusal(await b.call_tool("retire_memory", {"id": memory_id}))
                refusal(await b.call_tool("restore_memory", {"id": memory_id}))
            assert data(await b.call_tool("retrieve_memory", {"subject": "Fjord"}))["facts"] == []
            context = await b.call_tool("get_context", {"query": "fjord ada-secret"})
            if not context.is_error:
                assert "ada-secret" not in str(context.structured_content)
            data(await b.call_tool("remember", _fact("Fjord", "bob-value")))
            data(
                await b.call_tool(
                    "save_memory", {"subject": "Bob", "predicate": "likes", "object": "bob-tea"}
                )
            )
            data(await b.call_tool("remember", {"statement": "bob-note"}))
            data(await b.call_tool("remember_note", {"text": "bob-log"}))

    async with connect(gateway, ada) as a:
        (current,) = data(await a.call_tool("retrieve_memory", {"subject": "Fjord"}))["facts"]
        assert current["object"] == "ada-secret-value" and current["state"] == "live"
        assert data(await a.call_tool("retrieve_memory", {"subject": "Bob"}))["facts"] == []

    ada_dir = gateway.workspace_dir("ada@example.com")
    assert files_containing(ada_dir, "ada-secret-value")
    for needle in ("bob-value", "bob-tea", "bob-note", "bob-log"):
        assert files_containing(ada_dir, needle) == []
    for other_dir in (
        gateway.workspace_dir("bob@example.com"),
        gateway.workspace_dir("ada@example.com", "research"),
    ):
        assert files_containing(other_dir, "bob-tea")
        assert files_containing(other_dir, "ada-secret") == []


@pytest.mark.req("gw:isolation", "gw:pat", "engine:surface")
async def test_read_only_and_scope_pinned_tokens_are_enforced(gateway: Gateway) -> None:
    gateway.owner("cyd@example.com")
    full = gateway.token("cyd@example.com", "full")
    reader = gateway.token("cyd@example.com", "reader", "--read-only")
    pinned = gateway.token("cyd@example.com", "fjord agent", "--scope", "project:fjord")
    pinned_wide = gateway.token(
        "cyd@example.com", "fjord reader", "--scope", "project:fjord", "--reads-unscoped"
    )

    async with connect(gateway, full) as c:
        data(await c.call_tool("remember", _fact("Shared", "unscoped")))
        data(await c.call_tool("remember", _fact("Other", "elsewhere", scope="project:other")))

    async with connect(gateway, reader) as r:
        listed = {tool.name for tool in (await r.list_tools()).tools}
        assert listed == {"retrieve_memory", "get_context", "memory_status"}  # only what it may call
        for tool, args in (
            ("remember", {"statement": "read-only write"}),
            ("save_memory", {"subject": "a", "predicate": "b", "object": "c"}),
            ("remember_note", {"text": "read-only log"}),
        ):
            assert "read_only" in refusal(await r.call_tool(tool, args))
        assert len(data(await r.call_tool("retrieve_memory", {"subject": "Shared"}))["facts"]) == 1
    cyd_dir = gateway.workspace_dir("cyd@example.com")
    assert files_containing(cyd_dir, "read-only") == []

    async with connect(gateway, pinned) as p:
        for shown in (await p.list_tools()).tools:
            assert "pinned to scope 'project:fjord'" in (shown.description or ""), shown.name
        receipt = data(await p.call_tool("remember", _fact("Fjord db", "postgres")))
        assert receipt["scope"] == "project:fjord" and receipt["source"] == "fjord agent"
        refusal(await p.call_tool("remember", _fact("Fjord db", "mysql", scope="project:other")))
        refusal(await p.call_tool("retrieve_memory", {"subject": "Other", "scope": "project:other"}))
        assert data(await p.call_tool("retrieve_memory", {"subject": "Other"}))["facts"] == []
        # pinned as "this scope only" (the default): unscoped memories are out of its sight
        assert data(await p.call_tool("retrieve_memory", {"subject": "Shared"}))["facts"] == []
    async with connect(gateway, pinned_wide) as w:
        assert len(data(await w.call_tool("retrieve_memory", {"subject": "Shared"}))["facts"]) == 1
        assert data(await w.call_tool("retrieve_memory", {"subject": "Other"}))["facts"] == []
    assert files_containing(cyd_dir, "mysql") == []


@pytest.mark.req("gw:route")
async def test_legacy_sessions_work_through_the_gateway(gateway: Gateway) -> None:
    gateway.owner("dan@example.com")
    token = gateway.token("dan@example.com", "legacy client")
    async with connect(gateway, token, mode="legacy") as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        assert {"remember", "retrieve_memory", "get_context", "retire_memory", "restore_memory"} <= tools
        receipt = data(await c.call_tool("remember", _fact("Legacy", "works")))
        assert receipt["source"] == "legacy client"
    async with connect(gateway, token) as c:  # and the 2026-07-28 stateless protocol
        assert (
            data(await c.call_tool("retrieve_memory", {"id": receipt["id"]}))["facts"][0]["object"] == "works"
        )


@pytest.mark.req("gw:spawn")
async def test_an_engine_killed_mid_run_is_restarted(gateway: Gateway) -> None:
    gateway.owner("eve@example.com")
    token = gateway.token("eve@example.com", "eve")
    workspace = gateway.workspace_dir("eve@example.com")
    async with connect(gateway, token) as c:
        first = data(await c.call_tool("remember", _fact("Before", "the crash")))
        pid = gateway.engines()[workspace]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: gateway.engines().get(workspace, pid) != pid, what="the engine to be restarted")
        after = data(await c.call_tool("remember", _fact("After", "the crash")))
        assert after["action"] == "store"
        assert (
            data(await c.call_tool("retrieve_memory", {"id": first["id"]}))["facts"][0]["object"]
            == "the crash"
        )
    assert gateway.metric("almanac_engine_crashes_total") >= 1


@pytest.mark.req("gw:503", "write:no-queue")
async def test_a_workspace_that_cannot_start_gets_503_and_nothing_is_written(
    gateway: Gateway, tmp_path: Path
) -> None:
    gateway.owner("fay@example.com")
    token = gateway.token("fay@example.com", "fay")
    workspace = gateway.workspace_dir("fay@example.com")
    workspace.mkdir(parents=True, exist_ok=True)
    squatter = subprocess.Popen([*ENGINE, "--socket", str(tmp_path / "s.sock"), "--dir", str(workspace)])
    try:
        wait_for(lambda: (tmp_path / "s.sock").exists(), what="the squatting engine")
        before = gateway.metric("almanac_unavailable_total")
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"statement": "written-during-outage"}},
        }
        r = httpx.post(
            gateway.mcp_url,
            json=call,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
            timeout=30,
        )
        assert r.status_code == 503
        assert int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["code"] in ("engine_start_failed", "engine_crash_loop")
        with pytest.raises(Exception):  # noqa: B017 - the client's own error type for an HTTP 503
            async with connect(gateway, token) as c:
                await c.call_tool("remember", {"statement": "written-during-outage"})
        assert gateway.metric("almanac_unavailable_total") >= before + 1
    finally:
        squatter.terminate()
        squatter.wait(timeout=30)
    assert files_containing(workspace, "written-during-outage") == []

    def recovered() -> bool:
        r = httpx.post(gateway.mcp_url, json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        return r.status_code != 503

    wait_for(recovered, timeout=30, what="the workspace to start once the lock is free")
    async with connect(gateway, token) as c:
        assert data(await c.call_tool("retrieve_memory", {"subject": "anything"}))["facts"] == []
    assert files_containing(workspace, "written-during-outage") == []


@pytest.mark.req("engine:idle", "gw:spawn", "gw:ops")
async def test_idle_engines_stop_and_wake_on_the_next_call(tmp_path: Path) -> None:
    gw = start_gateway(tmp_path / "data", tmp_path / "gateway.log", engine_idle_timeout="0.5")
    try:
        gw.owner("gus@example.com")
        token = gw.token("gus@example.com", "gus")
        workspace = gw.workspace_dir("gus@example.com")
        async with connect(gw, token) as c:
            saved = data(await c.call_tool("remember", _fact("Sleep", "well")))
            pid = gw.engines()[workspace]
            wait_for(
                lambda: not alive(pid) and gw.metric("almanac_engines_running") == 0,
                what="the idle engine to stop",
            )
            assert workspace not in gw.engines()
            woken = data(await c.call_tool("retrieve_memory", {"id": saved["id"]}))
            assert woken["facts"][0]["object"] == "well"
            assert gw.engines().get(workspace, pid) != pid or workspace not in gw.engines()
        assert gw.metric("almanac_engine_cold_starts_total") >= 2
        assert gw.metric('almanac_engine_stops_total{reason="idle"}') >= 1
    finally:
        gw.stop()


@pytest.mark.req("gw:spawn", "gw:ops")
async def test_engines_share_one_embedder_and_logs_are_json(tmp_path: Path) -> None:
    gw = start_gateway(tmp_path / "data", tmp_path / "gateway.log", embedder="true")
    try:
        wait_for(lambda: httpx.get(gw.url + "/readyz").json()["checks"]["embedder"] == "ready", timeout=60,
                 what="the embedder service")  # fmt: skip
        gw.owner("hal@example.com")
        token = gw.token("hal@example.com", "hal")
        async with connect(gw, token) as c:
            data(await c.call_tool("remember", {"statement": "embedded once per host"}))
        workspace = gw.workspace_dir("hal@example.com")
        argv = cmdline(gw.engines()[workspace])
        embedder = [pid for pid in children(gw.proc.pid) if "engine.embed" in cmdline(pid)]
        assert len(embedder) == 1
        socket = cmdline(embedder[0])[cmdline(embedder[0]).index("--socket") + 1]
        assert argv[argv.index("--embedder-socket") + 1] == socket
    finally:
        gw.stop()
    events = [json.loads(line) for line in (tmp_path / "gateway.log").read_text().splitlines()]
    names = {e.get("event") for e in events}
    assert {"embedder.start", "engine.start", "engine.stop"} <= names
    start = next(e for e in events if e.get("event") == "engine.start")
    assert start["workspace"] == workspace.name and start["level"] == "info" and start["seconds"] > 0


@pytest.mark.req("quality:layouts")
async def test_an_exchange_kept_without_names_answers_who_said_what_through_the_gateway(
    gateway: Gateway,
) -> None:
    """An agent keeps a chat turn by turn, nothing saying who spoke, through the real gateway and
    engine: once the engine has worked out who wrote each turn (in the background, after each
    write is answered), a question about one person finds that person's own turn first."""
    import anyio

    from tests.engine.recall.test_layouts import ASKED, EXCHANGE

    gateway.owner("cleo@example.com")
    token = gateway.token("cleo@example.com", "Cleo's chat agent")
    async with connect(gateway, token) as client:
        ids = [data(await client.call_tool("remember", {"statement": said}))["id"] for _, said in EXCHANGE]

        async def firsts() -> dict[str, int]:
            out = {}
            for question in ASKED:
                notes = data(await client.call_tool("get_context", {"query": question}))["notes"]
                out[question] = ids.index(notes[0]["id"]) if notes and notes[0]["id"] in ids else -1
            return out

        found = await firsts()
        with anyio.fail_after(20):
            while found != ASKED:
                await anyio.sleep(
                    0.3
                )  # writers still being worked out (4 calls a round: under the rate limit)
                found = await firsts()
    assert found == ASKED
