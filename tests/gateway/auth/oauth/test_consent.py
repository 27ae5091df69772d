"""The consent step over real HTTP (a gateway in this process): the owner's choices travel with the
code, a workspace that is not the owner's is refused, denying answers ``access_denied``, and a
stale request says so (gw:oauth, sec:authz)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urljoin

import httpx
import pytest

from gateway.app import create_app
from gateway.auth.passwords import hash_password
from gateway.control.store import ControlPlane
from tests.gateway.auth.oauth.flow import _CSRF, _REQUEST, callback_params, field, pkce, sign_in
from tests.gateway.conftest import make_settings
from tests.gateway.inproc import serving

pytestmark = pytest.mark.anyio

PASSWORD = "correct horse battery"
REDIRECT = "http://127.0.0.1:7/callback"


@dataclass
class Consent:
    url: str
    store: ControlPlane
    browser: httpx.AsyncClient
    client_id: str

    async def open(self) -> tuple[str, str]:
        """Start an authorization and reach the consent page: (page URL, page HTML)."""
        _, challenge = pkce()
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "state": "st",
        }
        started = await self.browser.get(self.url + "/authorize?" + urlencode(query))
        assert started.status_code == 302
        page_url = urljoin(self.url, started.headers["location"])
        page = await self.browser.get(page_url)
        assert page.status_code == 200, page.text
        return page_url, page.text

    async def submit(self, html: str, **form: str) -> httpx.Response:
        values = {"csrf_token": field(_CSRF, html), "request": field(_REQUEST, html), **form}
        return await self.browser.post(self.url + "/consent", data=values)


@pytest.fixture
async def consent(data_dir: Path, database_url: str | None) -> AsyncIterator[Consent]:
    app = create_app(make_settings(data_dir, engine_warm_spare=False, database_url=database_url))
    store: ControlPlane = app.state.components.store
    owner, _ = store.owners.create("eve@example.com", hash_password(PASSWORD))
    store.owners.create_workspace(owner.id, "research")
    async with (
        serving(app, lifespan="on") as url,
        httpx.AsyncClient(base_url=url, timeout=30, headers={"Accept": "text/html"}) as browser,
    ):
        registered = await browser.post(
            "/register", json={"client_name": "Consent Test", "redirect_uris": ["http://127.0.0.1/callback"]}
        )
        await sign_in(browser, url + "/login?next=/", "eve@example.com", PASSWORD)
        yield Consent(url, store, browser, registered.json()["client_id"])


def _workspace_id(store: ControlPlane, email: str, name: str) -> str:
    return store.owners.workspace_by_name(store.owners.by_email(email).id, name).id


@pytest.mark.req("gw:oauth")
async def test_the_choices_on_the_page_travel_with_the_code(consent: Consent) -> None:
    _, html = await consent.open()
    assert "Consent Test" in html and "127.0.0.1:7" in html
    research = _workspace_id(consent.store, "eve@example.com", "research")
    answer = await consent.submit(
        html,
        name="Eve's research bot",
        workspace=research,
        read_only="1",
        scope="project:fjord",
        decision="approve",
    )
    assert answer.status_code == 303
    params = callback_params(answer.headers["location"])
    assert answer.headers["location"].startswith(REDIRECT + "?")
    assert params["state"] == "st" and params["iss"] == consent.url
    code = consent.store.oauth.code(params["code"])
    assert code is not None
    assert (code.choice.name, code.choice.workspace_id, code.choice.read_only, code.choice.scope) == (
        "Eve's research bot",
        research,
        True,
        "project:fjord",
    )
    assert any(e.kind == "oauth.grant" for e in consent.store.audit_log.events())


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_another_owners_workspace_is_refused(consent: Consent) -> None:
    _, theirs = consent.store.owners.create("mallory@example.com", None)
    _, html = await consent.open()
    answer = await consent.submit(html, name="sneaky", workspace=theirs.id, decision="approve")
    assert answer.status_code == 400
    assert "choose one of your own workspaces" in answer.text
    assert not any(e.kind == "oauth.grant" for e in consent.store.audit_log.events())


@pytest.mark.req("gw:oauth")
async def test_bad_names_and_scopes_are_explained_and_grant_nothing(consent: Consent) -> None:
    _, html = await consent.open()
    default = _workspace_id(consent.store, "eve@example.com", "default")
    answer = await consent.submit(html, name="ok", workspace=default, scope="../etc", decision="approve")
    assert answer.status_code == 400 and "not a valid label" in answer.text
    answer = await consent.submit(html, name="   ", workspace=default, decision="approve")
    assert answer.status_code == 400 and "1–100 printable characters" in answer.text
    assert not any(e.kind == "oauth.grant" for e in consent.store.audit_log.events())


@pytest.mark.req("gw:oauth")
async def test_denying_sends_access_denied_and_the_request_is_then_gone(consent: Consent) -> None:
    page_url, html = await consent.open()
    answer = await consent.submit(html, decision="deny")
    assert answer.status_code == 303
    params = callback_params(answer.headers["location"])
    assert params["error"] == "access_denied" and params["state"] == "st" and params["iss"] == consent.url
    stale = await consent.browser.get(page_url)
    assert stale.status_code == 400 and "expired" in stale.text


@pytest.mark.req("gw:oauth")
async def test_the_consent_page_needs_a_signed_in_owner(consent: Consent) -> None:
    page_url, _ = await consent.open()
    async with httpx.AsyncClient(timeout=30) as stranger:
        response = await stranger.get(page_url)
    assert response.status_code == 303
    assert re.match(r"^/login\?next=%2Fconsent%3Frequest%3D", response.headers["location"])
