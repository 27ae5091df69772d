"""``/activity`` (``life:retrieval-log``): the retrieval log of a workspace, over real HTTP with real
engines and in a real headless Chromium — an entry appears after a ``get_context`` through the real
MCP client, names its connection, and shows no more than the log holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Page

from gateway import layout
from gateway.web.activity import Known, row_of
from tests.gateway.e2e import Gateway, connect, data
from tests.gateway.web.browser import off_loop
from tests.gateway.web.conftest import Site, csrf_of, running_site
from tests.gateway.web.test_account import PASSWORD, sign_up
from tests.gateway.web.test_pages import assert_accessible

SECRET = "the gate code is marmalade"


def test_a_row_shows_what_the_line_holds_and_nothing_invented() -> None:
    line = {
        "ts": "2026-12-01T10:16:05.123Z",
        "query_sha256": "ab" * 32,
        "scope": None,
        "destination": "get_context",
        "mode": "keyword",
        "loaded": 3,
        "trimmed": 1,
        "kept": ["nte_1", "fct_2"],
        "scores": [0.91, 0.5],
        "tokens": 120,
        "latency_ms": 12.5,
        "source": None,
        "connection_id": "con_1",
    }
    row = row_of(line, {"con_1": Known("Cursor", "Token")})
    assert (row.when, row.source, row.kind, row.revoked, row.query, row.query_hash) == (
        "2026-12-01 10:16:05",
        "Cursor",
        "Token",
        False,
        None,
        "abababababab",
    )
    renamed = row_of(line, {"con_1": Known("Cursor at home", "Token", revoked=True)})
    assert (renamed.source, renamed.kind, renamed.revoked) == ("Cursor at home", "Token", True)
    assert row_of(line, {}).source == "a removed connection (con_1)"
    stdio = row_of(
        {**line, "connection_id": None, "source": "claude-code"}, {"con_1": Known("Cursor", "Token")}
    )
    assert (stdio.source, stdio.kind) == ("claude-code", None)
    assert [(k.id, k.score) for k in row.kept] == [("nte_1", 0.91), ("fct_2", 0.5)] and row.trimmed == 1
    bare = row_of({"ts": "2026-12-01T10:16:05Z", "kept": ["nte_1", 7]}, {})
    assert (bare.source, bare.kind, bare.tokens, bare.latency_ms) == (None, None, None, None)
    assert [k.id for k in bare.kept] == ["nte_1"] and bare.kept[0].score is None


async def _ask(site: Site, token: str, query: str) -> str:
    """Remember the secret, then get_context for ``query``; the secret's id."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(site.url + "/mcp", http_client=http)) as client:
        saved = data(await client.call_tool("remember", {"statement": f"Remember: {SECRET}."}))
        data(await client.call_tool("get_context", {"query": query}))
    return str(saved["id"])


@pytest.mark.anyio
@pytest.mark.req("life:retrieval-log", "gw:signin")
async def test_a_get_context_appears_with_its_connection_and_no_content(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        assert (await client.get("/activity")).headers["location"] == "/login?next=%2Factivity"
        await sign_up(client, "dee@example.com")
        owner = site.store.owners.by_email("dee@example.com")
        workspace = site.store.owners.workspaces(owner.id)[0]
        empty = await client.get("/activity")
        assert empty.status_code == 200 and "No retrievals" in empty.text
        _, token = site.store.connections.create_pat(owner.id, workspace.id, "Claude Code")
        memory_id = await _ask(site, token, "gate code")
        page = await client.get("/activity")
        row = re.search(r"<tbody>(.*?)</tbody>", page.text, re.S)
        assert row is not None
        assert "Claude Code" in row.group(1) and "(Token)" in row.group(1)
        assert "sha256 " in row.group(1) and f'href="/memories/{memory_id}?workspace=default"' in row.group(1)
        assert "marmalade" not in page.text and "gate code" not in page.text
        someone, _ = site.store.connections.create_pat(owner.id, workspace.id, "Someone else")
        only = await client.get("/activity", params={"connection": someone.id})
        assert "No retrievals through Someone else" in only.text

        # where the workspace logs queries, the query is shown (and still no memory's words)
        form = {"csrf_token": csrf_of(page.text), "workspace": "default", "log_queries": "true"}
        settings = await client.get("/settings")
        form["csrf_token"] = csrf_of(settings.text)
        assert (await client.post("/settings", data=form)).status_code == 303
        await _ask(site, token, "what is the gate code")
        page = await client.get("/activity")
        assert "what is the gate code" in page.text and "marmalade" not in page.text


@pytest.mark.req("life:retrieval-log", "gw:signin")
def test_see_an_entry_in_activity_after_a_get_context_in_a_real_browser(site: Gateway, page: Page) -> None:
    site.cli("owner", "create", "eli@example.com", stdin=PASSWORD + "\n")
    token = site.token("eli@example.com", "Cursor on desktop")

    async def recall() -> str:
        async with connect(site, token) as client:
            saved = data(await client.call_tool("remember", {"statement": f"Remember: {SECRET}."}))
            data(await client.call_tool("get_context", {"query": "gate code"}))
        return str(saved["id"])

    memory_id = off_loop(recall)
    page.goto(site.url + "/login")
    page.get_by_label("Email").fill("eli@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/")
    page.get_by_role("navigation", name="Account").get_by_role("link", name="Activity").click()
    page.wait_for_url(site.url + "/activity")
    assert_accessible(page)
    rows = page.get_by_role("region", name="Retrievals, newest first").get_by_role("row")
    assert rows.count() == 2  # the header and one retrieval
    entry = rows.nth(1)
    assert "Cursor on desktop" in entry.inner_text() and "sha256" in entry.inner_text()
    entry.get_by_text("1 memory").click()  # <details> opens without JavaScript
    link = entry.get_by_role("link", name=memory_id)
    assert link.is_visible()
    assert "marmalade" not in page.get_by_role("main").inner_text()
    page.get_by_label("Connection").select_option(label="Cursor on desktop")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(re.compile(r".*/activity\?workspace=default&connection=con_[A-Za-z0-9_-]+$"))
    assert page.get_by_role("region", name="Retrievals, newest first").get_by_role("row").count() == 2


@pytest.mark.anyio
@pytest.mark.req("life:retrieval-log")
async def test_the_log_keeps_connection_ids_and_the_page_names_them_as_they_are_now(data_dir: Path) -> None:
    """The contract between the gateway (its internal headers) and the engine (what its log keeps),
    both sides' real code: two tokens share a name; one is revoked; each retrieval stays its own."""
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "fay@example.com")
        owner = site.store.owners.by_email("fay@example.com")
        workspace = site.store.owners.workspaces(owner.id)[0]
        old, first = site.store.connections.create_pat(owner.id, workspace.id, "Laptop")
        await _ask(site, first, "gate code")
        site.store.connections.revoke(owner.id, old.id)
        new, second = site.store.connections.create_pat(owner.id, workspace.id, "Laptop")
        await _ask(site, second, "the gate")

        log = layout.workspace_dir(data_dir, workspace.id) / "retrieval-log.jsonl"
        lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        assert [line["connection_id"] for line in lines] == [old.id, new.id]
        assert "Laptop" not in log.read_text(encoding="utf-8")  # ids, never names

        page = await client.get("/activity")
        body = re.search(r"<tbody>(.*?)</tbody>", page.text, re.S)
        assert body is not None
        rows = re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
        assert len(rows) == 2
        assert "Laptop <span" in rows[0] and "(Token)" in rows[0]  # newest first: the live one
        assert "Laptop <span" in rows[1] and "(Token, revoked)" in rows[1]
        assert f'<option value="{old.id}">Laptop (revoked)</option>' in page.text
        only_old = await client.get("/activity", params={"connection": old.id})
        body = re.search(r"<tbody>(.*?)</tbody>", only_old.text, re.S)
        assert body is not None and len(re.findall(r"<tr>", body.group(1))) == 1
        assert "(Token, revoked)" in body.group(1)
