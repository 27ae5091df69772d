"""``/tokens/new`` (``gw:pat``, ``gw:signin``): a signed-in owner creates a personal access token on
the web; it is shown once and works on ``/mcp``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.gateway.e2e import Gateway, connect, data
from tests.gateway.web.browser import off_loop
from tests.gateway.web.conftest import csrf_of, running_site
from tests.gateway.web.test_account import sign_up
from tests.gateway.web.test_pages import PASSWORD, assert_accessible


@pytest.mark.anyio
@pytest.mark.req("gw:pat", "gw:signin")
async def test_a_token_made_on_the_web_is_shown_once_with_its_settings(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        assert (await client.get("/tokens/new")).headers["location"] == "/login?next=%2Ftokens%2Fnew"
        await sign_up(client, "ivy@example.com")
        page = await client.get("/tokens/new")
        assert page.status_code == 200 and '<option value="default" selected>' in page.text
        form = {"csrf_token": csrf_of(page.text), "name": "Cursor", "workspace": "default"}
        r = await client.post("/tokens/new", data={**form, "read_only": "1", "scope": "project:fjord"})
        assert r.status_code == 201
        found = re.search(r'id="token" type="text" readonly value="([^"]+)"', r.text)
        assert found is not None
        principal = site.store.connections.authenticate(found.group(1))
        assert principal is not None and principal.connection_name == "Cursor"
        assert principal.read_only and principal.scope == "project:fjord"
        assert found.group(1) not in (await client.get("/")).text
        # refusals say what to fix and create nothing
        r = await client.post("/tokens/new", data={**form})
        assert r.status_code == 409 and "already exists" in r.text
        r = await client.post("/tokens/new", data={**form, "name": "B", "scope": "../etc"})
        assert r.status_code == 400 and "is not a valid label" in r.text
        r = await client.post("/tokens/new", data={**form, "name": "C", "workspace": "someone-elses"})
        assert r.status_code == 404 and "pick one from the list" in r.text
        owner = site.store.owners.by_email("ivy@example.com")
        assert [c.name for c in site.store.connections.of_owner(owner.id)] == ["Cursor"]


@pytest.mark.anyio
@pytest.mark.req("sec:authz", "gw:signin")
async def test_the_token_form_needs_the_session_csrf_token(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "jay@example.com")
        for token in (None, "forged"):
            form = {"name": "x", "workspace": "default"} | ({} if token is None else {"csrf_token": token})
            assert (await client.post("/tokens/new", data=form)).status_code == 403
        assert site.store.connections.of_owner(site.store.owners.by_email("jay@example.com").id) == []


@pytest.mark.req("gw:pat", "gw:signin")
def test_sign_up_in_the_browser_then_a_web_token_writes_memory(site: Gateway, page: Page) -> None:
    page.goto(site.url + "/signup")
    page.get_by_label("Email").fill("kay@example.com")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url(site.url + "/")
    page.get_by_role("link", name="Create a token").click()
    assert_accessible(page)
    page.get_by_label("Name").fill("Browser-made token")
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_label("Token (shown once)").input_value()
    assert page.get_by_role("status").inner_text().startswith("Token 'Browser-made token' created")

    async def remember() -> dict[str, object]:
        async with connect(site, token) as client:
            return data(await client.call_tool("remember", {"statement": "made on the web"}))

    receipt = off_loop(remember)
    assert receipt["source"] == "Browser-made token" and receipt["action"] == "store"
