"""``almanac control migrate-to-postgres`` (run:scale-out): a single-host control plane, populated
through the real commands and HTTP (owners, a second workspace, a personal token, an OAuth grant,
memories), copied into a real PostgreSQL (tests/pg.py) by the real command; then a real
``almanac serve`` on PostgreSQL and the same data directory accepts the old token and the OAuth
grant and serves the old memories. And the refusals: each one line, exit status 2, nothing changed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlencode

import apsw
import httpx
import psycopg
import pytest

from gateway.control.db import redact
from tests.gateway.auth.oauth.flow import approve, callback_params, discover, pkce
from tests.gateway.e2e import ALMANAC, Gateway, clean_env, connect, data, start_gateway
from tests.pg import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EMAIL, PASSWORD = "ada@example.com", "correct horse battery staple"


def almanac(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ALMANAC, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(env or {}),
        stdin=subprocess.DEVNULL,
    )


def migrate(data_dir: Path, url: str) -> subprocess.CompletedProcess[str]:
    return almanac(
        "control", "migrate-to-postgres", "--data-dir", str(data_dir), env={"ALMANAC_DATABASE_URL": url}
    )


def tables(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


def sqlite_counts(path: Path) -> dict[str, int]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND name != 'schema_migrations'"
            )
        ]
        return {n: int(str(conn.execute(f'SELECT count(*) FROM "{n}"').fetchall()[0][0])) for n in names}
    finally:
        conn.close()


def one_line_refusal(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


async def oauth_grant(gateway: Gateway) -> tuple[str, dict[str, str]]:
    """An OAuth grant made as a client makes it: registration, sign-in, consent, code exchange.
    Returns the client id and the token response."""
    async with (
        httpx.AsyncClient(timeout=30) as http,
        httpx.AsyncClient(timeout=30, headers={"Accept": "text/html"}) as browser,
    ):
        found = await discover(http, gateway.mcp_url)
        meta = found.metadata
        registered = await http.post(
            meta["registration_endpoint"],
            json={"client_name": "Fjord agent app", "redirect_uris": ["http://127.0.0.1/callback"]},
        )
        client_id = str(registered.json()["client_id"])
        verifier, challenge = pkce()
        redirect = "http://127.0.0.1:43117/callback"
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s",
            "scope": "memory",
            "resource": found.resource,
        }
        back = await approve(
            browser,
            meta["authorization_endpoint"] + "?" + urlencode(query),
            email=EMAIL,
            password=PASSWORD,
            name="Fjord agent",
            workspace="research",
        )
        exchange = {
            "grant_type": "authorization_code",
            "code": callback_params(back)["code"],
            "client_id": client_id,
            "redirect_uri": redirect,
            "code_verifier": verifier,
            "resource": found.resource,
        }
        answer = await http.post(meta["token_endpoint"], data=exchange)
        assert answer.status_code == 200, answer.text
        return client_id, dict(answer.json())


@pytest.mark.req("run:scale-out", "run:cli")
async def test_a_single_host_control_plane_moves_to_postgresql_and_serves_as_before(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    data_dir = tmp_path / "data"
    gateway = start_gateway(data_dir, tmp_path / "sqlite.log", engine_warm_spare="false")
    port = gateway.url.rsplit(":", 1)[1]
    url = postgres.create_database()
    try:
        gateway.cli("owner", "create", EMAIL, "--password-stdin", stdin=PASSWORD + "\n")
        gateway.cli("workspace", "create", "research", "--owner", EMAIL)
        pat = gateway.token(EMAIL, "laptop")
        async with connect(gateway, pat) as client:
            data(await client.call_tool("remember", {"statement": "the fjord deploy uses blue-green"}))
        client_id, grant = await oauth_grant(gateway)
        async with connect(gateway, grant["access_token"]) as client:
            data(await client.call_tool("remember", {"statement": "research notes live in the attic"}))

        # refused while that gateway serves the data directory: nothing is created in PostgreSQL
        one_line_refusal(migrate(data_dir, url), "almanac serve` is running on the data directory")
        assert tables(url) == []
    finally:
        gateway.stop()

    # refused: a target that already holds a table (named), which is left as it was
    busy = postgres.create_database()
    with psycopg.connect(busy, autocommit=True) as conn:
        conn.execute("CREATE TABLE inventory (id INTEGER PRIMARY KEY)")
        conn.execute("INSERT INTO inventory VALUES (7)")
    one_line_refusal(
        migrate(data_dir, busy), "is not empty: it holds tables (inventory)", "nothing was changed"
    )
    assert tables(busy) == ["inventory"]
    with psycopg.connect(busy, autocommit=True) as conn:
        assert conn.execute("SELECT id FROM inventory").fetchall() == [(7,)]
    assert not (data_dir / "control.db.moved").exists()

    before = sqlite_counts(data_dir / "control.db")
    moved = migrate(data_dir, url)
    assert moved.returncode == 0, moved.stderr
    assert f"into {redact(url)}" in moved.stderr
    printed = {line.split("\t")[0]: line.split("\t")[1:] for line in moved.stdout.splitlines()}
    assert set(printed) == set(before)  # every table
    for table, count in before.items():
        assert printed[table][:2] == [str(count), str(count)], table
    assert before["owners"] == 1 and before["workspaces"] == 2 and before["tokens"] >= 3
    assert before["oauth_clients"] == 1 and before["audit_events"] > 0
    with psycopg.connect(url, autocommit=True) as conn:
        for table, count in before.items():
            assert conn.execute(f'SELECT count(*) FROM "{table}"').fetchone() == (count,), table

    # a second run finds the SQLite control plane moved: refused, the target untouched
    again = postgres.create_database()
    one_line_refusal(migrate(data_dir, again), "was moved to PostgreSQL", "set database_url")
    assert tables(again) == []
    # and so does `almanac serve` without database_url: nothing serves the old copy by mistake
    stale = almanac("serve", "--port", "0", "--data-dir", str(data_dir), env={"ALMANAC_EMBEDDER": "false"})
    one_line_refusal(stale, "was moved to PostgreSQL")

    served = start_gateway(
        data_dir, tmp_path / "postgres.log", port=port, database_url=url, engine_warm_spare="false"
    )
    try:
        async with connect(served, pat) as client:  # the token minted before
            found = await client.call_tool("get_context", {"query": "fjord deploy"})
            assert "blue-green" in str(found.content)
        async with connect(served, grant["access_token"]) as client:  # the OAuth grant, its workspace
            found = await client.call_tool("get_context", {"query": "research notes attic"})
            assert "attic" in str(found.content)
        async with httpx.AsyncClient(timeout=30) as http:  # its refresh token rotates
            meta = (await http.get(served.url + "/.well-known/oauth-authorization-server")).json()
            refreshed = await http.post(
                meta["token_endpoint"],
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": grant["refresh_token"],
                    "client_id": client_id,
                },
            )
            assert refreshed.status_code == 200, refreshed.text
        # new rows numbered after the copied ones (an audit event per new token)
        with psycopg.connect(url, autocommit=True) as conn:
            copied_top = conn.execute("SELECT max(id) FROM audit_events").fetchone()
        newer = served.token(EMAIL, "desktop")
        with psycopg.connect(url, autocommit=True) as conn:
            latest = conn.execute("SELECT max(id) FROM audit_events WHERE kind = 'token.create'").fetchone()
        assert copied_top and latest and latest[0] > copied_top[0]
        async with connect(served, newer) as client:
            data(await client.call_tool("remember", {"statement": "written after the move"}))
        listed = served.cli("token", "list", "--owner", EMAIL)
        assert "laptop" in listed and "Fjord agent" in listed and "desktop" in listed
    finally:
        served.stop()


@pytest.mark.req("run:scale-out", "run:cli")
def test_refusals_are_one_line_and_change_nothing(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.create_database()
    empty = tmp_path / "empty"
    one_line_refusal(migrate(empty, url), "no Almanac data in")
    data_dir = tmp_path / "data"
    assert almanac("owner", "create", EMAIL, "--data-dir", str(data_dir)).returncode == 0
    no_url = almanac("control", "migrate-to-postgres", "--data-dir", str(data_dir))
    one_line_refusal(no_url, "--database-url or ALMANAC_DATABASE_URL")
    one_line_refusal(migrate(data_dir, "mysql://root@127.0.0.1/almanac"), "must be a PostgreSQL URL")
    unreachable = "postgresql://almanac:hunter2@127.0.0.1:1/almanac"
    one_line_refusal(migrate(data_dir, unreachable), "cannot connect to PostgreSQL at", redact(unreachable))

    # a value SQLite holds but PostgreSQL cannot (a NUL character in a text column): the whole copy
    # is rolled back — not even the schema is left — and the SQLite control plane stays usable
    conn = apsw.Connection(str(data_dir / "control.db"))
    conn.execute("UPDATE owners SET password_hash = ?", ("bad\x00hash",))
    conn.close()
    one_line_refusal(migrate(data_dir, url), "table owners", "nothing was changed")
    assert tables(url) == []
    assert not (data_dir / "control.db.moved").exists()
    listed = almanac("workspace", "list", "--owner", EMAIL, "--data-dir", str(data_dir))
    assert listed.returncode == 0 and "default" in listed.stdout

    # a value PostgreSQL takes but reads back otherwise (bytes in a text column: PostgreSQL keeps
    # their hex): the counts agree, the checksums do not, and the copy is rolled back before commit
    conn = apsw.Connection(str(data_dir / "control.db"))
    conn.execute("UPDATE owners SET password_hash = X'6869'")
    conn.close()
    one_line_refusal(
        migrate(data_dir, url),
        "differs from the SQLite control plane (owners: 1 rows on both sides but their contents differ)",
        "rolled back: nothing was changed",
    )
    assert tables(url) == []
    assert not (data_dir / "control.db.moved").exists()
