"""``/connections`` (``gw:pat``, ``gw:oauth``, ``gw:signin``): every personal access token and OAuth
grant of the owner, with revoking that takes effect on ``/mcp`` at once."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Page

from gateway.control.records import Connection, Revocation
from gateway.web.connections import REASON_MAX, REVOKED_SHOWN, row_of, rows, why
from tests.gateway.auth.oauth.flow import approve, callback_params, pkce
from tests.gateway.e2e import Gateway, connect, data, files_containing
from tests.gateway.web.browser import off_loop
from tests.gateway.web.conftest import Site, csrf_of, running_site
from tests.gateway.web.test_account import PASSWORD, sign_up
from tests.gateway.web.test_pages import assert_accessible

CALLBACK = "https://claude.ai/api/mcp/auth_callback"


def _connection(n: int, *, kind: str = "pat", revoked: str | None = None, **extra: object) -> Connection:
    values: dict[str, object] = {
        "id": f"con_{n}",
        "owner_id": "own_1",
        "workspace_id": "ws_1",
        "workspace_name": "default",
        "name": f"c{n}",
        "kind": kind,
        "read_only": False,
        "scope": None,
        "created_at": f"2026-01-{n % 28 + 1:02d}T10:16:05.000000Z",
        "last_used_at": None,
        "revoked_at": revoked,
        "token_prefix": "alm_pat_ab12" if kind == "pat" else None,
    }
    values.update(extra)
    return Connection(**values)  # type: ignore[arg-type]


def test_rows_show_kind_client_access_and_minutes() -> None:
    pat = row_of(_connection(1, read_only=True, scope="project:fjord", last_used_at="2026-02-03T04:05:06.7Z"))
    shown = (pat.kind, pat.client, pat.access, pat.scope)
    assert shown == ("Token", "alm_pat_ab12…", "read-only", "project:fjord")
    assert (pat.created, pat.last_used) == ("2026-01-02 10:16", "2026-02-03 04:05")
    named = row_of(_connection(2, kind="oauth", client_id="https://c.example/meta", client_name="Claude"))
    anonymous = row_of(_connection(3, kind="oauth", client_id="https://c.example/meta"))
    assert (named.kind, named.client, anonymous.client) == ("OAuth", "Claude", "https://c.example/meta")


def test_rows_split_live_from_the_newest_revoked() -> None:
    everything = [_connection(1), _connection(2, revoked="2026-03-01T00:00:00.0Z")]
    everything += [_connection(10 + i, revoked=f"2026-04-{i + 1:02d}T00:00:00.0Z") for i in range(25)]
    live, revoked = rows(everything)
    assert [r.name for r in live] == ["c1"]
    assert len(revoked) == REVOKED_SHOWN and revoked[0].name == "c34" and revoked[-1].name == "c15"


async def _oauth_grant(site: Site, client: httpx.AsyncClient, email: str, name: str) -> str:
    """Register a client called Claude, approve it as ``email`` in ``client`` (signed in), return
    the access token it gets."""
    registered = (
        await client.post("/register", json={"client_name": "Claude", "redirect_uris": [CALLBACK]})
    ).json()
    verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": registered["client_id"],
        "redirect_uri": CALLBACK,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": site.url + "/mcp",
    }
    location = await approve(
        client, site.url + "/authorize?" + urlencode(query), email=email, password=PASSWORD, name=name
    )
    code = callback_params(location)["code"]
    exchange = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": CALLBACK,
        "client_id": registered["client_id"],
        "code_verifier": verifier,
        "resource": site.url + "/mcp",
    }
    tokens = await client.post("/token", data=exchange)
    assert tokens.status_code == 200, tokens.text
    return str(tokens.json()["access_token"])


def _revoke_form(html: str, name: str) -> dict[str, str]:
    """The revoke form of the row named ``name``."""
    row = re.search(r'<th scope="row" class="name">' + re.escape(name) + r"</th>(.*?)</tr>", html, re.S)
    assert row is not None, f"no row for {name!r}"
    found = re.search(r'href="/connections/revoke\?connection=([^"]+)"', row.group(1))
    assert found is not None
    return {"csrf_token": csrf_of(html), "connection": found.group(1)}


@pytest.mark.anyio
@pytest.mark.req("gw:pat", "gw:oauth", "gw:signin")
async def test_the_page_lists_tokens_and_oauth_grants_and_revokes_them_at_once(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        assert (await client.get("/connections")).headers["location"] == "/login?next=%2Fconnections"
        await sign_up(client, "oz@example.com")
        owner = site.store.owners.by_email("oz@example.com")
        workspace = site.store.owners.workspaces(owner.id)[0]
        _, secret = site.store.connections.create_pat(
            owner.id, workspace.id, "Laptop", read_only=True, scope="project:fjord"
        )
        access = await _oauth_grant(site, client, "oz@example.com", "Claude on the web")
        page = await client.get("/connections")
        assert page.status_code == 200
        laptop = re.search(r'class="name">Laptop</th>(.*?)</tr>', page.text, re.S)
        claude = re.search(r'class="name">Claude on the web</th>(.*?)</tr>', page.text, re.S)
        assert laptop is not None and claude is not None
        for cell in ("Token", "read-only", "project:fjord", "never", secret[:8]):
            assert cell in laptop.group(1), cell
        assert "OAuth" in claude.group(1) and 'data-label="Client">Claude</td>' in claude.group(1)
        assert secret not in page.text and access not in page.text

        # revoking: the token stops working at once, the page says so, the audit names it
        mcp = {"Authorization": f"Bearer {access}", "Accept": "application/json, text/event-stream"}
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert (await client.post("/mcp", json=ping, headers=mcp)).status_code != 401
        done = await client.post("/connections/revoke", data=_revoke_form(page.text, "Claude on the web"))
        assert done.status_code == 303
        assert (await client.post("/mcp", json=ping, headers=mcp)).status_code == 401
        assert (
            site.store.connections.authenticate(access) is None
            and site.store.connections.authenticate(secret) is not None
        )
        after = await client.get(done.headers["location"])
        assert "Revoked &#39;Claude on the web&#39;" in after.text
        assert "Recently revoked" in after.text
        event = site.store.audit_log.events(owner_id=owner.id, limit=1)[0]
        assert event.kind == "token.revoke" and event.detail["name"] == "Claude on the web"


@pytest.mark.anyio
@pytest.mark.req("gw:signin", "sec:authz")
async def test_revoking_needs_csrf_and_only_reaches_ones_own_connections(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client, site.client() as other:
        await sign_up(client, "pia@example.com")
        await sign_up(other, "quinn@example.com")
        pia, quinn = (site.store.owners.by_email(e) for e in ("pia@example.com", "quinn@example.com"))
        theirs, _ = site.store.connections.create_pat(
            quinn.id, site.store.owners.workspaces(quinn.id)[0].id, "Quinn's"
        )
        mine, _ = site.store.connections.create_pat(
            pia.id, site.store.owners.workspaces(pia.id)[0].id, "Pia's"
        )
        page = await client.get("/connections")
        assert "Quinn&#39;s" not in page.text
        form = _revoke_form(page.text, "Pia&#39;s")
        for token in (None, "forged"):
            bad = {"connection": mine.id} | ({} if token is None else {"csrf_token": token})
            assert (await client.post("/connections/revoke", data=bad)).status_code == 403
        refused = await client.post("/connections/revoke", data={**form, "connection": theirs.id})
        assert refused.status_code == 404 and "not one of your live connections" in refused.text
        refused = await client.post("/connections/revoke", data={**form, "connection": "Pia's"})
        assert refused.status_code == 404  # an id, never a name
        assert [c.name for c in site.store.connections.of_owner(quinn.id)] == ["Quinn's"]
        assert [c.name for c in site.store.connections.of_owner(pia.id)] == ["Pia's"]


@pytest.mark.anyio
@pytest.mark.req("gw:pat")
async def test_a_revoked_connection_fails_inside_an_open_mcp_session(data_dir: Path) -> None:
    """The real MCP client, mid-session: the call after the revocation is refused."""
    async with running_site(data_dir) as site, site.client() as browser:
        await sign_up(browser, "rae@example.com")
        owner = site.store.owners.by_email("rae@example.com")
        _, secret = site.store.connections.create_pat(
            owner.id, site.store.owners.workspaces(owner.id)[0].id, "Agent"
        )
        statuses: list[int] = []

        async def seen(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {secret}"}, timeout=60, event_hooks={"response": [seen]}
        )
        async with http, Client(streamable_http_client(site.url + "/mcp", http_client=http)) as mcp:
            receipt = data(await mcp.call_tool("remember", {"statement": "before the revocation"}))
            assert receipt["source"] == "Agent" and 401 not in statuses
            page = await browser.get("/connections")
            done = await browser.post("/connections/revoke", data=_revoke_form(page.text, "Agent"))
            assert done.status_code == 303
            with pytest.raises(Exception):  # noqa: B017 - the client reports any HTTP error alike
                await mcp.call_tool("remember", {"statement": "after the revocation"})
            assert statuses[-1] == 401
        assert files_containing(data_dir, "before the revocation")
        assert not files_containing(data_dir, "after the revocation")


@pytest.mark.req("gw:pat", "gw:signin")
def test_create_a_token_then_revoke_it_in_a_real_browser(site: Gateway, page: Page) -> None:
    site.cli("owner", "create", "sol@example.com", stdin=PASSWORD + "\n")
    page.goto(site.url + "/login")
    page.get_by_label("Email").fill("sol@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/")
    page.get_by_role("navigation", name="Account").get_by_role("link", name="Connections").click()
    page.wait_for_url(site.url + "/connections")
    assert_accessible(page)
    assert "No live connections" in page.get_by_role("main").inner_text()
    page.get_by_role("link", name="Create a token").click()
    page.get_by_label("Name").fill("Browser token")
    page.get_by_label("Read-only (the client can recall but not write)").check()
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_label("Token (shown once)").input_value()

    async def recall() -> dict[str, object]:
        async with connect(site, token) as client:
            return data(await client.call_tool("memory_status", {}))

    assert off_loop(recall)
    page.get_by_role("link", name="See all your connections").click()
    row = page.get_by_role("row", name=re.compile("Browser token"))
    assert "read-only" in row.inner_text() and "Token" in row.inner_text()
    assert token not in page.content()
    link = page.get_by_role("link", name="Revoke Browser token")
    link.focus()
    page.keyboard.press("Enter")  # the keyboard is enough
    page.wait_for_url(site.url + "/connections/revoke?connection=*")
    assert_accessible(page)
    assert page.get_by_role("heading", level=1).inner_text() == "Revoke “Browser token”?"
    page.get_by_role("link", name="Keep it").click()  # changing one's mind changes nothing
    page.wait_for_url(site.url + "/connections")
    assert "Recently revoked" not in page.get_by_role("main").inner_text()
    page.get_by_role("link", name="Revoke Browser token").click()
    page.get_by_label("Why (optional)").fill("laptop lost")
    page.get_by_role("button", name="Revoke").click()
    page.wait_for_url(site.url + "/connections?revoked=*")
    assert_accessible(page)
    assert page.get_by_role("status").inner_text() == "Revoked 'Browser token': its tokens no longer work."
    revoked = page.get_by_role("region", name="Recently revoked")
    assert "Browser token" in revoked.inner_text()
    assert "You revoked it on this page: “laptop lost”" in revoked.inner_text()

    async def refused() -> int:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient(timeout=30) as http:
            return (await http.post(site.mcp_url, json=ping, headers=headers)).status_code

    assert off_loop(refused) == 401
    listed = site.cli("token", "list", "--owner", "sol@example.com", "--all")
    assert listed.strip().split("\t")[-1] == "pat"


@pytest.mark.anyio
@pytest.mark.req("gw:rest")
async def test_a_rest_call_moves_the_tokens_last_used_like_an_mcp_call(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "oz@example.com")
        owner = site.store.owners.by_email("oz@example.com")
        workspace = site.store.owners.workspaces(owner.id)[0]
        _, secret = site.store.connections.create_pat(owner.id, workspace.id, "Script")

        def script_row(html: str) -> str:
            found = re.search(r'class="name">Script</th>(.*?)</tr>', html, re.S)
            assert found is not None
            return found.group(1)

        assert "never" in script_row((await client.get("/connections")).text)
        async with httpx.AsyncClient(base_url=site.url, timeout=60) as api:
            bearer = {"Authorization": f"Bearer {secret}"}
            reply = await api.post("/api/v1/context", json={"query": "anything"}, headers=bearer)
        assert reply.status_code == 200, reply.text
        (script,) = [c for c in site.store.connections.of_owner(owner.id) if c.name == "Script"]
        assert script.last_used_at is not None
        row = script_row((await client.get("/connections")).text)
        assert "never" not in row and f'<time datetime="{script.last_used_at}' in row


def test_why_a_connection_was_revoked_reads_as_words() -> None:
    assert why(None) == "No reason recorded."
    assert (
        why(Revocation("token.revoke", "page", "laptop lost")) == "You revoked it on this page: “laptop lost”"
    )
    assert why(Revocation("token.revoke", "page", None)) == "You revoked it on this page."
    assert why(Revocation("token.revoke", "cli", None)) == "Revoked on the server with almanac token revoke."
    assert why(Revocation("token.revoke", "api", None)) == "Revoked through the REST API."
    assert why(Revocation("token.revoke", None, "revoked by the client")) == "Revoked by the client."
    assert why(Revocation("token.revoke", None, None)) == "No reason recorded."
    assert "refresh token was used again" in why(
        Revocation("oauth.refresh_reuse", None, "refresh token reused")
    )


@pytest.mark.anyio
@pytest.mark.req("gw:pat", "gw:signin", "gw:ops")
async def test_revoking_is_confirmed_first_and_records_why(data_dir: Path) -> None:
    """The Revoke link only asks (a GET changes nothing); the confirming POST revokes and records the
    owner's reason, which the page shows beside the revoked connection; an over-long reason is
    refused with nothing revoked. A revocation from the command line says so."""
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "uma@example.com")
        owner = site.store.owners.by_email("uma@example.com")
        workspace = site.store.owners.workspaces(owner.id)[0]
        agent, _ = site.store.connections.create_pat(owner.id, workspace.id, "Agent")
        spare, _ = site.store.connections.create_pat(owner.id, workspace.id, "Spare")
        page = await client.get("/connections")
        form = _revoke_form(page.text, "Agent")
        asked = await client.get("/connections/revoke", params={"connection": agent.id})
        assert asked.status_code == 200 and "Revoke “Agent”?" in asked.text
        assert [c.name for c in site.store.connections.of_owner(owner.id)] == ["Agent", "Spare"]
        assert (await client.get("/connections/revoke", params={"connection": "nope"})).status_code == 404

        too_long = await client.post("/connections/revoke", data={**form, "reason": "x" * (REASON_MAX + 1)})
        assert too_long.status_code == 400 and f"at most {REASON_MAX}" in too_long.text
        assert [c.name for c in site.store.connections.of_owner(owner.id)] == ["Agent", "Spare"]

        done = await client.post("/connections/revoke", data={**form, "reason": "  laptop\n lost  "})
        assert done.status_code == 303
        site.store.connections.revoke(owner.id, spare.id, via="cli")
        after = await client.get("/connections")
        shown = re.search(r"Recently revoked(.*)</table>", after.text, re.S)
        assert shown is not None
        assert "You revoked it on this page: “laptop lost”" in shown.group(1)
        assert "Revoked on the server with almanac token revoke." in shown.group(1)
        event = site.store.audit_log.events(owner_id=owner.id, limit=2)[1]
        assert event.kind == "token.revoke" and event.detail == {
            "name": "Agent",
            "reason": "laptop lost",
            "via": "page",
        }
