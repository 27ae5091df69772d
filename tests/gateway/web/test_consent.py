"""The consent page in a real headless Chromium (``gw:oauth``): a client's authorization request
sends the browser to sign in, then to consent; approving sends it back to the client with a code
that the client exchanges for a working token. No JavaScript anywhere."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from playwright.sync_api import Page

from tests.gateway.auth.oauth.flow import pkce
from tests.gateway.e2e import Gateway

PASSWORD = "correct horse battery"


@pytest.fixture
def callback() -> Iterator[tuple[str, list[str]]]:
    """A client's loopback redirect listener: records the query of every request it gets."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = b"<!doctype html><title>Done</title><h1>Signed in; you can close this tab.</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/callback", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.req("gw:oauth", "gw:signin")
def test_sign_in_and_approve_a_client_in_a_real_browser(
    site: Gateway, page: Page, callback: tuple[str, list[str]]
) -> None:
    redirect, seen = callback
    site.cli("owner", "create", "lin@example.com", stdin=PASSWORD + "\n")
    registered = httpx.post(
        site.url + "/register",
        json={"client_name": "Browser Test Client", "redirect_uris": ["http://127.0.0.1/callback"]},
        timeout=30,
    ).json()
    verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": registered["client_id"],
        "redirect_uri": redirect,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "browser-state",
        "resource": site.mcp_url,
    }
    page.goto(site.url + "/authorize?" + urlencode(query))
    assert "/login" in page.url
    page.get_by_label("Email").fill("lin@example.com")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    with page.expect_response(lambda r: "/consent?" in r.url) as consent:
        page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/consent?**")
    # forms may post here only, and this one's answer may go on to the client's redirect URI alone
    policy = consent.value.headers["content-security-policy"]
    assert policy.endswith(f"; form-action 'self' http://127.0.0.1:{urlsplit(redirect).port}"), policy

    heading = page.get_by_role("heading", level=1).inner_text()
    assert heading == "Connect Browser Test Client?"
    assert page.locator("code.redirect-host").inner_text() == urlsplit(redirect).netloc
    assert page.evaluate("() => document.scripts.length") == 0
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select')]
            .filter(el => !(el.labels && el.labels.length)).map(el => el.name)"""
    )
    assert unlabelled == []
    page.get_by_label("Name this connection").fill("Lin's browser agent")
    page.get_by_label("Read-only").check()
    page.get_by_role("button", name="Approve").click()
    page.wait_for_url(redirect + "?**")

    back = next(
        path for path in seen if path.startswith("/callback?")
    )  # (the browser also asks for a favicon)
    answer = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
    assert answer["state"] == "browser-state" and answer["iss"] == site.url
    tokens = httpx.post(
        site.url + "/token",
        data={
            "grant_type": "authorization_code",
            "code": answer["code"],
            "client_id": registered["client_id"],
            "redirect_uri": redirect,
            "code_verifier": verifier,
        },
        timeout=30,
    )
    assert tokens.status_code == 200, tokens.text
    listed = site.cli("token", "list", "--owner", "lin@example.com")
    line = next(row for row in listed.splitlines() if "Lin's browser agent" in row)
    assert "read-only" in line and line.split("\t")[-1] == "oauth"


@pytest.mark.req("gw:oauth", "sec:authz")
def test_consent_is_refused_without_the_pages_csrf_token(site: Gateway, page: Page) -> None:
    """A form posted from another page (no CSRF token, or a forged one) grants nothing."""
    site.cli("owner", "create", "mo@example.com", stdin=PASSWORD + "\n")
    page.goto(site.url + "/login")
    page.get_by_label("Email").fill("mo@example.com")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/")
    registered = httpx.post(
        site.url + "/register", json={"redirect_uris": ["http://127.0.0.1/callback"]}, timeout=30
    ).json()
    _, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": registered["client_id"],
        "redirect_uri": "http://127.0.0.1:9/callback",
        "code_challenge": challenge,
    }
    page.goto(site.url + "/authorize?" + urlencode(query))
    page.wait_for_url(site.url + "/consent?**")
    request_id = page.locator('input[name="request"]').get_attribute("value")
    forged = page.request.post(
        site.url + "/consent",
        form={"request": str(request_id), "name": "forged", "decision": "approve", "csrf_token": "guess"},
        max_redirects=0,
    )
    assert forged.status == 403
    assert "forged" not in site.cli("token", "list", "--owner", "mo@example.com")
