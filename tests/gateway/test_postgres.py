"""End to end with the control plane in PostgreSQL: the real ``almanac serve`` and admin commands
given ``ALMANAC_DATABASE_URL`` (or ``--database-url``), a real PostgreSQL server (tests/pg.py), real
engines and the real MCP client."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from gateway.control.db import redact
from tests.gateway.e2e import (
    ALMANAC,
    Gateway,
    clean_env,
    connect,
    data,
    files_containing,
    start_gateway,
    wait_for,
)
from tests.pg import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    return postgres.create_database()


@pytest.fixture
def gateway(tmp_path: Path, url: str) -> Iterator[Gateway]:
    gw = start_gateway(
        tmp_path / "data",
        tmp_path / "gateway.log",
        database_url=url,
        engine_warm_spare="false",
        node="node-a",
        advertise_url="http://node-a.internal:8080",
        cluster_secret="c" * 40,
        node_heartbeat_interval="0.2",
    )
    yield gw
    gw.stop()


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return list(conn.execute(sql.encode()).fetchall())


@pytest.mark.req("run:scale-out", "run:config")
async def test_the_gateway_keeps_its_control_plane_in_postgresql(gateway: Gateway, url: str) -> None:
    gateway.owner("ada@example.com")
    token = gateway.token("ada@example.com", "Ada's laptop")
    async with connect(gateway, token) as client:
        stored = data(await client.call_tool("remember", {"statement": "the fjord deploy uses blue-green"}))
        assert stored["source"] == "Ada's laptop"
        context = await client.call_tool("get_context", {"query": "fjord deploy"})
        assert "blue-green" in str(context.content)
    # the owner, the token and the audit trail are rows in PostgreSQL; no SQLite file was made
    assert _rows(url, "SELECT email FROM owners") == [("ada@example.com",)]
    kinds = {str(r[0]) for r in _rows(url, "SELECT kind FROM audit_events")}
    assert {"owner.create", "token.create"} <= kinds
    assert not (gateway.data_dir / "control.db").exists()
    # started as a node: registered, and beating
    assert _rows(url, "SELECT name, advertise_url, draining FROM nodes") == [
        ("node-a", "http://node-a.internal:8080", 0)
    ]
    first_beat = _rows(url, "SELECT heartbeat_at FROM nodes")[0][0]
    wait_for(lambda: _rows(url, "SELECT heartbeat_at FROM nodes")[0][0] != first_beat, what="a heartbeat")
    # the memory itself lives in the workspace's Markdown store in the data directory, as always
    assert files_containing(gateway.workspace_dir("ada@example.com"), "blue-green")
    # revoking through the control plane shuts the token out
    gateway.cli("token", "revoke", "--owner", "ada@example.com", "Ada's laptop")
    wait_for(lambda: _status(gateway, token) == 401, timeout=5, what="the revoked token to be refused")


def _status(gateway: Gateway, token: str) -> int:
    """The HTTP status of an MCP ping with ``token``."""
    response = httpx.post(
        gateway.mcp_url,
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        timeout=30,
    )
    return response.status_code


@pytest.mark.req("run:scale-out")
async def test_two_gateways_share_one_postgresql_control_plane(
    gateway: Gateway, url: str, tmp_path: Path
) -> None:
    """A token made through one gateway's database is honoured by another gateway on another data
    directory: the control plane is shared, only the workspaces' folders are per node."""
    other = start_gateway(
        tmp_path / "other-data", tmp_path / "other.log", database_url=url, engine_warm_spare="false"
    )
    try:
        gateway.owner("bob@example.com")
        token = gateway.token("bob@example.com", "Bob's agent")
        async with connect(other, token) as client:
            stored = data(
                await client.call_tool("remember", {"statement": "written through the other gateway"})
            )
            assert stored["source"] == "Bob's agent"
        assert files_containing(other.data_dir / "workspaces", "through the other gateway")
        assert not files_containing(gateway.data_dir / "workspaces", "through the other gateway")
        # revoked through the first gateway's commands: refused by the other one too
        gateway.cli("token", "revoke", "--owner", "bob@example.com", "Bob's agent")
        wait_for(lambda: _status(other, token) == 401, timeout=5, what="the other gateway to refuse it")
    finally:
        other.stop()


@pytest.mark.req("run:config")
def test_serve_refuses_a_database_url_it_cannot_use(tmp_path: Path) -> None:
    def serve(database_url: str, *flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                ALMANAC,
                "serve",
                "--port",
                "0",
                "--data-dir",
                str(tmp_path),
                "--database-url",
                database_url,
                *flags,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env({"ALMANAC_EMBEDDER": "false"}),
            stdin=subprocess.DEVNULL,
        )

    wrong_kind = serve("mysql://root@127.0.0.1/almanac")
    assert wrong_kind.returncode == 2
    assert "database_url must be a PostgreSQL URL" in wrong_kind.stderr
    unreachable_url = "postgresql://almanac:hunter2@127.0.0.1:1/almanac"
    unreachable = serve(unreachable_url)
    assert unreachable.returncode == 2
    assert (
        f"cannot connect to the PostgreSQL control plane at {redact(unreachable_url)}" in unreachable.stderr
    )
    assert "hunter2" not in unreachable.stderr + unreachable.stdout
    assert len(unreachable.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "control.db").exists()  # nothing fell back to SQLite
    lone_node = serve("", "--node", "node-a", "--advertise", "http://node-a:8080")
    assert lone_node.returncode == 2 and "set database_url" in lone_node.stderr
