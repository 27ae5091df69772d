"""Sign-in through an upstream OpenID Connect provider (``gw:signin``), against a small provider
the test serves on loopback (``oidc_provider.py``): discovery, code + PKCE, a signed ID token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.auth.passwords import hash_password
from tests.gateway.inproc import serving
from tests.gateway.web.conftest import Site, running_site
from tests.gateway.web.oidc_provider import CLIENT_ID, CLIENT_SECRET, Person, Provider

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def with_provider(data_dir: Path, **settings: Any) -> AsyncIterator[tuple[Site, Provider]]:
    provider = Provider()
    async with serving(provider.app()) as issuer:
        provider.issuer = issuer
        oidc = {"oidc_issuer": issuer, "oidc_client_id": CLIENT_ID, "oidc_client_secret": CLIENT_SECRET}
        async with running_site(data_dir, oidc_name="Test ID", **oidc, **settings) as site:
            yield site, provider


async def through_provider(client: httpx.AsyncClient, next_path: str = "/") -> httpx.Response:
    """Start at the gateway, follow the provider's redirect back; the gateway's last answer."""
    r = await client.get("/login/oidc", params={"next": next_path})
    assert r.status_code == 302, r.text
    r = await client.get(r.headers["location"])  # the provider signs the person in at once
    assert r.status_code == 302, r.text
    return await client.get(r.headers["location"])  # the callback


@pytest.mark.req("gw:signin", "gw:ops")
async def test_first_sign_in_creates_the_owner_and_later_ones_find_it(data_dir: Path) -> None:
    async with with_provider(data_dir) as (site, provider), site.client() as client:
        assert "Sign in with Test ID" in (await client.get("/login")).text
        provider.person = Person("sub-1", "oli@example.com")
        r = await through_provider(client, "/?from=oidc")
        assert r.status_code == 303 and r.headers["location"] == "/?from=oidc"
        assert "oli@example.com" in (await client.get("/")).text
        (token_request,) = provider.token_requests
        assert len(token_request["code_verifier"]) >= 43  # PKCE S256 (the provider checked it)
        client.cookies.clear()
        provider.person = Person("sub-1", "oli.new@example.com")  # the email changed upstream
        assert (await through_provider(client)).status_code == 303
        assert "oli@example.com" in (await client.get("/")).text  # same owner: linked by subject
        owner = site.store.owners.by_email("oli@example.com")
        events = [
            (e.kind, e.detail.get("method")) for e in reversed(site.store.audit_log.events(owner_id=owner.id))
        ]
        assert ("signup", "oidc") in events and events.count(("signin.success", "oidc")) == 2
        assert site.store.owners.password_hash(owner.id) is None


@pytest.mark.req("gw:signin")
async def test_a_verified_email_links_the_existing_owner(data_dir: Path) -> None:
    async with with_provider(data_dir, signup="closed") as (site, provider), site.client() as client:
        owner, _ = site.store.owners.create("pam@example.com", hash_password("a password here"))
        provider.person = Person("sub-pam", "pam@example.com")
        assert (await through_provider(client)).status_code == 303
        assert site.store.accounts.owner_by_identity(provider.issuer, "sub-pam").id == owner.id


@pytest.mark.req("gw:signin")
async def test_unverified_email_or_closed_sign_up_is_refused(data_dir: Path) -> None:
    async with with_provider(data_dir) as (site, provider), site.client() as client:
        site.store.owners.create("quin@example.com", None)
        provider.person = Person("sub-q", "quin@example.com", email_verified=False)
        r = await through_provider(client)
        assert r.status_code == 403 and "verified email" in r.text
        assert (await client.get("/")).status_code == 303
        with pytest.raises(Exception, match="no owner is linked"):
            site.store.accounts.owner_by_identity(provider.issuer, "sub-q")
    async with with_provider(data_dir, signup="invite") as (site, provider), site.client() as client:
        provider.person = Person("sub-r", "rae@example.com")
        r = await through_provider(client)
        assert r.status_code == 403 and "sign-up is closed" in r.text
        with pytest.raises(Exception, match="no owner"):
            site.store.owners.by_email("rae@example.com")
        assert site.store.audit_log.events(limit=1)[0].kind == "signin.failure"


@pytest.mark.req("gw:signin", "sec:authz")
@pytest.mark.parametrize("tamper", ["issuer", "audience", "nonce", "signature"])
async def test_a_bad_id_token_is_refused(data_dir: Path, tamper: str) -> None:
    async with with_provider(data_dir) as (site, provider), site.client() as client:
        provider.person = Person("sub-s", "sam@example.com")
        provider.tamper = tamper
        r = await through_provider(client)
        assert r.status_code == 403 and "answer was refused" in r.text
        assert (await client.get("/")).status_code == 303
        with pytest.raises(Exception, match="no owner"):
            site.store.owners.by_email("sam@example.com")


@pytest.mark.req("gw:signin", "sec:authz")
async def test_a_callback_in_another_browser_is_refused(data_dir: Path) -> None:
    async with (
        with_provider(data_dir) as (site, provider),
        site.client() as victim,
        site.client() as attacker,
    ):
        provider.person = Person("sub-t", "tim@example.com")
        r = await attacker.get("/login/oidc")
        r = await attacker.get(r.headers["location"])
        r = await victim.get(r.headers["location"])  # login CSRF: the attacker's code, the victim's browser
        assert r.status_code == 403 and "another browser" in r.text
        assert (await victim.get("/")).status_code == 303
        callback = str(r.url)
        assert (await attacker.get(callback)).status_code == 303  # in the browser that started it
        assert (await attacker.get(callback)).status_code == 403  # once only
