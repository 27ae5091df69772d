"""Cookies of the container default — listening on every interface, no ``public_url`` — in a real
headless Chromium (``gw:signin``): they are ``Secure`` and ``__Host-`` (the gateway may be behind a
TLS proxy it cannot see), and signing in over plain http on this machine still works, because a
browser keeps ``Secure`` cookies from ``http://localhost`` and ``http://127.0.0.1``."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page

from tests.gateway.e2e import Gateway
from tests.gateway.web.test_account import PASSWORD


@pytest.mark.req("gw:signin", "sec:authz")
@pytest.mark.parametrize("name", ["localhost", "127.0.0.1"])
def test_on_every_interface_cookies_are_secure_and_local_http_still_signs_in(
    start_site: Callable[..., Gateway], page: Page, name: str
) -> None:
    site = start_site(host="0.0.0.0")
    site.cli("owner", "create", "ka@example.com", stdin=PASSWORD + "\n")
    base = f"http://{name}:{urlsplit(site.url).port}"
    page.goto(base + "/login")
    page.get_by_label("Email").fill("ka@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")
    assert "ka@example.com" in page.content()  # signed in: the Secure cookie came back
    cookies = {c["name"]: c for c in page.context.cookies(base)}
    session = cookies["__Host-almanac_session"]
    assert session["secure"] and session["httpOnly"] and session["sameSite"] == "Lax"
    assert "almanac_session" not in cookies
    page.goto(base + "/settings")  # and keeps working from page to page
    assert page.url == base + "/settings"
