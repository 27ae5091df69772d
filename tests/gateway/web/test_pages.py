"""The account pages in a real headless Chromium (``gw:signin``): sign up, sign out, sign in with
the keyboard; every input has a label; the landmarks exist; no page needs JavaScript."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.gateway.e2e import Gateway

PASSWORD = "correct horse battery"


def assert_accessible(page: Page) -> None:
    """Landmarks exist, every visible form control has a label, the page has one h1."""
    for landmark in ("banner", "main", "contentinfo"):
        assert page.get_by_role(landmark).count() == 1, landmark
    assert page.locator("h1").count() == 1
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
            .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
            .map(el => el.name || el.id)"""
    )
    assert unlabelled == []
    assert page.evaluate("() => document.scripts.length") == 0


@pytest.mark.req("gw:signin")
def test_sign_up_sign_out_sign_in_in_a_real_browser(site: Gateway, page: Page) -> None:
    page.goto(site.url + "/")
    assert page.url == site.url + "/login?next=%2F"
    assert_accessible(page)
    page.get_by_role("link", name="Create an account").click()
    assert_accessible(page)
    page.get_by_label("Email").fill("kit@example.com")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url(site.url + "/")
    assert_accessible(page)
    assert page.get_by_role("banner").get_by_text("kit@example.com").is_visible()
    assert page.get_by_label("MCP server URL").input_value() == site.mcp_url
    cookie = next(c for c in page.context.cookies() if c["name"] == "almanac_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(site.url + "/login?signed_out=1")
    assert page.get_by_role("status").inner_text() == "You are signed out."
    page.goto(site.url + "/")
    assert "/login" in page.url

    # sign in with the keyboard only: the email field has focus, Tab moves on, Enter submits
    assert page.evaluate("() => document.activeElement.id") == "email"
    page.keyboard.type("kit@example.com")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "password"
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(site.url + "/")
    assert page.get_by_role("heading", level=1).inner_text() == "Your memory"


@pytest.mark.req("sec:authz")
def test_a_form_cannot_post_to_another_site(site: Gateway, page: Page) -> None:
    """``form-action 'self'``: a form planted in a page (an injection CSP's other rules let by) is
    not sent elsewhere — the browser refuses the navigation."""
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    response = page.goto(site.url + "/login")
    assert response is not None
    assert response.headers["content-security-policy"].endswith("; form-action 'self'")
    page.evaluate(
        """() => {
            const form = document.createElement('form');
            form.method = 'post';
            form.action = 'http://127.0.0.1:9/steal';
            document.body.appendChild(form);
            form.submit();
        }"""
    )
    page.wait_for_load_state()
    assert page.url == site.url + "/login" and not any("/steal" in url for url in seen)


@pytest.mark.req("gw:signin")
def test_a_wrong_password_is_announced_and_the_skip_link_works(site: Gateway, page: Page) -> None:
    site.cli("owner", "create", "lu@example.com", stdin=PASSWORD + "\n")
    page.goto(site.url + "/login")
    assert page.evaluate("() => document.activeElement.id") == "email"  # autofocus
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")  # back past the brand link to the skip link, the first stop
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("() => location.hash") == "#main"
    page.get_by_label("Email").fill("lu@example.com")
    page.get_by_label("Password").fill("not it at all")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    assert "do not match an account" in alert.inner_text()
    assert page.get_by_label("Email").input_value() == "lu@example.com"
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(site.url + "/")
