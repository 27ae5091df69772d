"""A client's side of the sign-in flow, over real HTTP, for the end-to-end tests: discovery from the
401, registration, the browser's part (sign-in and consent forms, submitted as a browser would),
and the code exchange."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx

_RESOURCE_METADATA = re.compile(r'resource_metadata="([^"]+)"')
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
_REQUEST = re.compile(r'name="request" value="([^"]+)"')
_OPTION = re.compile(r'<option value="([^"]+)"[^>]*>([^<]+)</option>')


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


@dataclass(frozen=True)
class Started:
    """A public client registered and its authorization begun: where to send the browser."""

    client_id: str
    verifier: str
    path: str  # ``/authorize?…`` on the gateway


def start_authorization(base_url: str, client_name: str, redirect_uri: str, state: str) -> Started:
    """Register a public client as an MCP client registers itself (RFC 7591), and build its
    ``/authorize`` request with a fresh PKCE pair."""
    registered = httpx.post(
        base_url + "/register",
        json={"client_name": client_name, "redirect_uris": [redirect_uri]},
        timeout=30,
    )
    assert registered.status_code == 201, registered.text
    client_id = str(registered.json()["client_id"])
    verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": state,
    }
    return Started(client_id, verifier, "/authorize?" + urlencode(query))


def field(pattern: re.Pattern[str], html: str) -> str:
    found = pattern.search(html)
    assert found is not None, f"no {pattern.pattern!r} in the page:\n{html[:2000]}"
    return found.group(1)


@dataclass(frozen=True)
class Discovered:
    resource: str
    issuer: str
    metadata: dict[str, Any]


async def discover(http: httpx.AsyncClient, mcp_url: str) -> Discovered:
    """What a client learns from one unauthenticated call: the 401 → RFC 9728 → RFC 8414."""
    refused = await http.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401
    prm_url = field(_RESOURCE_METADATA, refused.headers["www-authenticate"])
    prm = (await http.get(prm_url)).json()
    issuer = prm["authorization_servers"][0]
    metadata = (await http.get(issuer + "/.well-known/oauth-authorization-server")).json()
    assert metadata["issuer"] == issuer
    return Discovered(prm["resource"], issuer, metadata)


async def sign_in(browser: httpx.AsyncClient, login_url: str, email: str, password: str) -> httpx.Response:
    """Follow the sign-in page the way a browser would; returns the response to the form."""
    page = await browser.get(login_url)
    assert page.status_code == 200, page.text
    nxt = parse_qs(urlsplit(login_url).query).get("next", ["/"])[0]
    form = {"csrf_token": field(_CSRF, page.text), "email": email, "password": password, "next": nxt}
    answer = await browser.post(urljoin(login_url, "/login"), data=form)
    assert answer.status_code == 303, answer.text
    return answer


async def approve(
    browser: httpx.AsyncClient,
    authorize_url: str,
    *,
    email: str,
    password: str,
    name: str,
    workspace: str = "default",
    read_only: bool = False,
    scope: str = "",
    reads: str | None = None,
    seen: list[str] | None = None,
) -> str:
    """Open an authorization URL in a 'browser' (signing in if asked), approve the consent page
    with these choices (``reads``: what a pinned connection reads, ``scope`` or ``unscoped``; None
    sends no choice), and return where the browser is sent back to (the client's redirect URI).
    ``seen`` collects the consent page's HTML."""
    response = await browser.get(authorize_url)
    assert response.status_code == 302, response.text
    consent_url = urljoin(authorize_url, response.headers["location"])
    page = await browser.get(consent_url)
    if page.status_code == 303:  # not signed in yet
        login_url = urljoin(consent_url, page.headers["location"])
        back = await sign_in(browser, login_url, email, password)
        page = await browser.get(urljoin(consent_url, back.headers["location"]))
    assert page.status_code == 200, page.text
    if seen is not None:
        seen.append(page.text)
    workspaces = {label.strip(): value for value, label in _OPTION.findall(page.text)}
    form = {
        "csrf_token": field(_CSRF, page.text),
        "request": field(_REQUEST, page.text),
        "name": name,
        "workspace": workspaces[workspace],
        "scope": scope,
        "decision": "approve",
    }
    if read_only:
        form["read_only"] = "1"
    if reads is not None:
        form["reads"] = reads
    answer = await browser.post(urljoin(consent_url, "/consent"), data=form)
    assert answer.status_code == 303, answer.text
    return str(answer.headers["location"])


def callback_params(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
