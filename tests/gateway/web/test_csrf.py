"""CSRF on the account forms (``sec:authz``): a form without this browser's token, with another
browser's token, or sent from another origin is refused with 403 ``csrf_failed`` and changes
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.web.conftest import csrf_of, running_site
from tests.gateway.web.test_account import PASSWORD, sign_up

pytestmark = pytest.mark.anyio


@pytest.mark.req("sec:authz", "gw:signin")
async def test_sign_up_without_a_valid_token_is_refused(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client, site.client() as other:
        other_token = csrf_of((await other.get("/signup")).text)
        await client.get("/signup")  # this browser has its own pre-session cookie
        form = {"email": "eve@example.com", "password": PASSWORD, "confirm": PASSWORD}
        for token in (None, "", "forged", other_token):
            data = form if token is None else {**form, "csrf_token": token}
            r = await client.post("/signup", data=data)
            assert r.status_code == 403 and "security token" in r.text, token
        with pytest.raises(Exception, match="no owner"):
            site.store.owners.by_email("eve@example.com")
        assert site.store.audit_log.events() == []


@pytest.mark.req("sec:authz", "gw:signin")
async def test_sign_in_without_a_valid_token_is_refused(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "fay@example.com")
        client.cookies.clear()
        await client.get("/login")
        form = {"email": "fay@example.com", "password": PASSWORD}
        assert (await client.post("/login", data=form)).status_code == 403
        r = await client.post("/login", data={**form, "csrf_token": "forged"})
        assert r.status_code == 403
        # a JSON client gets the error envelope
        r = await client.post("/login", data=form, headers={"Accept": "application/json"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed"
        assert (await client.get("/")).status_code == 303
        assert [e.kind for e in site.store.audit_log.events(limit=1)] == ["signin.success"]  # sign-up's only


@pytest.mark.req("sec:authz", "gw:signin")
async def test_a_cross_site_post_is_refused_even_with_the_token(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        page = await client.get("/login")
        await sign_up(client, "gus@example.com")
        client.cookies.clear()
        page = await client.get("/login")
        r = await client.post(
            "/login",
            data={"csrf_token": csrf_of(page.text), "email": "gus@example.com", "password": PASSWORD},
            headers={"Origin": "https://evil.example"},
        )
        assert r.status_code == 403 and "from another site" in r.text
        assert (await client.get("/")).status_code == 303


@pytest.mark.req("sec:authz", "gw:signin")
async def test_sign_out_without_the_session_token_is_refused(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "hal@example.com")
        presession = client.cookies.get("almanac_presession")  # the token the sign-up form carried
        assert presession
        for data in ({}, {"csrf_token": "forged"}, {"csrf_token": presession}):
            r = await client.post("/logout", data=data)
            assert r.status_code == 403, data
        home = await client.get("/")
        assert home.status_code == 200 and "hal@example.com" in home.text
        assert "signout" not in [e.kind for e in site.store.audit_log.events()]
