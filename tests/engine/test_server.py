"""The engine as a process: stdio and a Unix socket, identity headers, crashes, the lock, stopping."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.engine.support import (
    engine_command,
    snapshot,
    socket_client,
    socket_engine,
    stdio_client,
    wait_healthy,
)

FACT = {"statement": "Fjord uses Postgres", "subject": "Fjord", "predicate": "database", "object": "Postgres"}


@pytest.mark.req("engine:mcp")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_stdio_engine_serves_the_tools(tmp_path: Path, mode: str) -> None:
    async def go() -> tuple[Any, Any]:
        async with stdio_client(tmp_path / "ws", mode=mode) as client:
            stored = await client.call_tool("remember", FACT)
            found = await client.call_tool("retrieve_memory", {"subject": "Fjord"})
            return stored, found

    stored, found = anyio.run(go)
    assert stored.structured_content["action"] == "store"
    assert found.structured_content["facts"][0]["object"] == "Postgres"
    assert (tmp_path / "ws" / "facts").is_dir()


@pytest.mark.req("engine:mcp")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
def test_socket_engine_serves_both_protocol_eras(tmp_path: Path, mode: str) -> None:
    sock = tmp_path / "e.sock"
    with socket_engine(tmp_path / "ws", sock):
        assert sock.stat().st_mode & 0o777 == 0o600

        async def go() -> Any:
            async with socket_client(sock, mode=mode) as client:
                await client.call_tool("remember", FACT)
                return await client.call_tool("retrieve_memory", {"subject": "fjord"})

        result = anyio.run(go)
    assert result.structured_content["facts"][0]["object"] == "Postgres"


@pytest.mark.req("engine:identity")
@pytest.mark.req("write:source")
def test_identity_headers_from_the_gateway_are_honoured(tmp_path: Path) -> None:
    sock = tmp_path / "e.sock"
    named = {"X-Almanac-Connection": "Claude%20Code%20on%20laptop%20%E2%9C%93"}
    reader = {"X-Almanac-Connection": "viewer", "X-Almanac-Read-Only": "1"}
    pinned = {"X-Almanac-Connection": "fjord-bot", "X-Almanac-Scope": "project:fjord"}
    with socket_engine(tmp_path / "ws", sock):

        async def go() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with socket_client(sock, named) as client:
                out["named"] = (await client.call_tool("remember", {"statement": "n1"})).structured_content
            async with socket_client(sock, reader) as client:
                out["ro_write"] = await client.call_tool("remember", {"statement": "nope"})
                out["ro_read"] = await client.call_tool("retrieve_memory", {"id": out["named"]["id"]})
            async with socket_client(sock, pinned) as client:
                out["pinned"] = (await client.call_tool("remember", FACT)).structured_content
                out["pinned_other"] = await client.call_tool(
                    "remember", {"statement": "x", "scope": "project:kelp"}
                )
            return out

        out = anyio.run(go)
    assert (out["named"]["source"], out["named"]["source_verified"]) == ("Claude Code on laptop ✓", True)
    assert out["ro_write"].is_error and "read-only" in out["ro_write"].content[0].text
    assert out["ro_read"].structured_content["notes"][0]["text"] == "n1"
    assert out["pinned"]["scope"] == "project:fjord" and out["pinned"]["source"] == "fjord-bot"
    assert out["pinned_other"].is_error and "pinned to scope" in out["pinned_other"].content[0].text


@pytest.mark.req("store:durable")
def test_an_acknowledged_write_survives_kill_9(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    with socket_engine(ws, sock) as proc:

        async def write() -> list[dict[str, Any]]:
            async with socket_client(sock) as client:
                return [
                    (await client.call_tool("remember", FACT)).structured_content,
                    (await client.call_tool("remember", {"statement": "a note, whole"})).structured_content,
                    (await client.call_tool("remember_note", {"text": "a log line"})).structured_content,
                ]

        receipts = anyio.run(write)
        os.kill(proc.pid, signal.SIGKILL)  # right after the last receipt came back
        proc.wait(timeout=10)
    with socket_engine(ws, sock):  # a new engine on the same directory

        async def read() -> list[Any]:
            async with socket_client(sock) as client:
                return [
                    (await client.call_tool("retrieve_memory", {"id": r["id"]})).structured_content
                    for r in receipts
                ]

        found = anyio.run(read)
    assert found[0]["facts"][0]["object"] == "Postgres"
    assert found[1]["notes"][0]["text"] == "a note, whole"
    assert found[2]["notes"][0]["text"] == "a log line"


@pytest.mark.req("store:torn-tail")
def test_garbage_on_the_ledger_tail_does_not_block_later_writes_or_reads(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"

    async def remember(args: dict[str, Any]) -> Any:
        async with socket_client(sock) as client:
            return await client.call_tool("remember", args)

    async def history() -> Any:
        async with socket_client(sock) as client:
            return await client.call_tool("retrieve_memory", {"subject": "Fjord", "include_history": True})

    with socket_engine(ws, sock):
        anyio.run(remember, FACT)
    segment = next((ws / "facts").glob("*.md"))
    with segment.open("a", encoding="utf-8") as handle:
        handle.write(
            "## evt_01M8N16DCB2YF0D3N6WQF1NBY5 supersede\n\n```yaml\ntime: '2026-0"
        )  # a crash mid-append
    with socket_engine(ws, sock):
        later = anyio.run(remember, {**FACT, "object": "SQLite", "statement": "moved to SQLite"})
        assert later.structured_content["action"] == "supersede"
        facts = anyio.run(history).structured_content["facts"]
    assert [(f["object"], f["current"]) for f in facts] == [("SQLite", True), ("Postgres", False)]
    assert "\n## evt_" in segment.read_text(encoding="utf-8").split("time: '2026-0", 1)[1]
    with socket_engine(ws, sock):  # and again after another restart
        assert len(anyio.run(history).structured_content["facts"]) == 2


@pytest.mark.req("store:durable")
def test_a_second_engine_on_a_served_directory_exits_3_touching_nothing(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    with socket_engine(ws, sock):
        anyio.run(_remember_one, sock)
        before = snapshot(ws)
        second = subprocess.run(
            engine_command("--stdio", "--dir", str(ws)),
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        assert second.returncode == 3
        assert b"another engine" in second.stderr
        assert snapshot(ws) == before


async def _remember_one(sock: Path) -> None:
    async with socket_client(sock) as client:
        await client.call_tool("remember", {"statement": "one"})


@pytest.mark.req("engine:mcp")
def test_sigterm_stops_the_engine_cleanly(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    with socket_engine(ws, sock) as proc:
        anyio.run(_remember_one, sock)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert not sock.exists()


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(engine_command("--dir", str(tmp_path)), capture_output=True, timeout=30)
    assert result.returncode == 2 and b"--stdio" in result.stderr


@pytest.mark.req("engine:mcp")
def test_a_warm_spare_serves_the_workspace_it_is_assigned(tmp_path: Path) -> None:
    ws, sock, log = tmp_path / "ws", tmp_path / "e.sock", tmp_path / "ws.log"
    proc = subprocess.Popen(engine_command("--await-assignment"), stdin=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"socket": str(sock), "dir": str(ws), "log": str(log)}).encode() + b"\n")
        proc.stdin.close()
        wait_healthy(sock, proc)
        anyio.run(_remember_one, sock)
        assert (ws / "notes").is_dir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("line, code", [(b"", 0), (b"{not json}\n", 2), (b'{"dir": "x"}\n', 2)])
def test_a_spare_without_a_good_assignment_exits(line: bytes, code: int) -> None:
    done = subprocess.run(engine_command("--await-assignment"), input=line, capture_output=True, timeout=60)
    assert done.returncode == code
    assert (b"bad assignment" in done.stderr) == (code == 2)


@pytest.mark.req("engine:idle")
@pytest.mark.req("store:durable")
def test_an_idle_stop_during_a_stream_of_writes_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    acknowledged: list[str] = []
    with socket_engine(ws, sock) as proc:

        async def writer(n: int) -> None:
            try:
                async with socket_client(sock) as client:
                    for i in range(40):
                        result = await client.call_tool("remember", {"statement": f"writer {n} item {i}"})
                        if not result.is_error and result.structured_content:
                            acknowledged.append(result.structured_content["id"])
                        if len(acknowledged) == 20:
                            proc.send_signal(signal.SIGTERM)  # the supervisor's idle stop, mid-stream
            except Exception:
                return

        async def writers() -> None:
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(writer, n)

        anyio.run(writers)
        assert proc.wait(timeout=30) == 0
    assert len(acknowledged) >= 20
    with socket_engine(ws, sock):

        async def read() -> list[Any]:
            async with socket_client(sock) as client:
                return [await client.call_tool("retrieve_memory", {"id": i}) for i in acknowledged]

        found = anyio.run(read)
    assert all(not r.is_error for r in found)


def _initialize(sock: Path, headers: dict[str, str]) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=10.0) as http:
        return http.post("http://localhost/mcp", json=body, headers={**accept, **headers}).status_code


@pytest.mark.req("engine:surface")
def test_the_engine_socket_checks_host_and_origin(tmp_path: Path) -> None:
    sock = tmp_path / "e.sock"
    with socket_engine(tmp_path / "ws", sock):
        assert _initialize(sock, {"Host": "evil.example.com"}) == 421
        assert _initialize(sock, {"Host": "localhost", "Origin": "http://evil.example.com"}) == 403
        assert _initialize(sock, {"Host": "localhost"}) == 200  # what the gateway sends
        assert _initialize(sock, {"Host": "127.0.0.1:8080", "Origin": "http://127.0.0.1:8080"}) == 200
