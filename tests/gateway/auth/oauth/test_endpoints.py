"""The authorization server's endpoints over real HTTP (a gateway in this process, on port 0, with
an injected clock): discovery, registration, /authorize and /token refusals, rotation, revocation,
and /mcp's checks of OAuth tokens (audience, expiry)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gateway.app import create_app
from gateway.control.records import ConsentChoice
from gateway.control.store import ControlPlane
from tests.gateway.conftest import make_settings
from tests.gateway.inproc import serving

pytestmark = pytest.mark.anyio

REDIRECT = "http://127.0.0.1:9/callback"


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Server:
    url: str
    store: ControlPlane
    clock: Clock
    http: httpx.AsyncClient


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


@pytest.fixture
async def server(data_dir: Path, database_url: str | None) -> AsyncIterator[Server]:
    clock = Clock()
    app = create_app(make_settings(data_dir, engine_warm_spare=False, database_url=database_url), clock=clock)
    async with serving(app, lifespan="on") as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        yield Server(url, app.state.components.store, clock, http)


async def _register(server: Server, **extra: object) -> str:
    body = {"client_name": "Test client", "redirect_uris": ["http://127.0.0.1/callback"], **extra}
    response = await server.http.post("/register", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["client_id"])


def _code(server: Server, client_id: str, challenge: str, *, resource: str | None = None) -> str:
    """A code as the consent page would record it (the page itself is tested with a browser)."""
    owner, workspace = server.store.owners.create(f"{secrets.token_hex(4)}@example.com", None)
    return server.store.oauth.save_code(
        client_id=client_id,
        choice=ConsentChoice(owner.id, workspace.id, "Test client", read_only=False, scope=None),
        redirect_uri=REDIRECT,
        redirect_explicit=True,
        code_challenge=challenge,
        resource=resource or server.url + "/mcp",
        scopes=("memory",),
        now=server.clock(),
        ttl=120,
        remote=None,
    )


async def _exchange(
    server: Server, client_id: str, code: str, verifier: str | None, **extra: str
) -> httpx.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "redirect_uri": REDIRECT,
    }
    if verifier is not None:
        form["code_verifier"] = verifier
    return await server.http.post("/token", data={**form, **extra})


async def _mcp(server: Server, token: str) -> httpx.Response:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return await server.http.post("/mcp", json=ping, headers=headers)


@pytest.mark.req("gw:oauth")
async def test_discovery_from_the_401_to_the_server_metadata(server: Server) -> None:
    refused = await server.http.post("/mcp", json={})
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert f'resource_metadata="{server.url}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="memory"' in challenge
    message = refused.json()["error"]["message"]
    assert "sign in" in message and "almanac token create" in message
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        prm = (await server.http.get(path)).json()
        assert prm["resource"] == server.url + "/mcp"
        assert prm["authorization_servers"] == [server.url]
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        meta = (await server.http.get(path)).json()
        assert meta["issuer"] == server.url
        assert meta["code_challenge_methods_supported"] == ["S256"]
        assert "none" in meta["token_endpoint_auth_methods_supported"]
        assert meta["authorization_response_iss_parameter_supported"] is True
        assert meta["client_id_metadata_document_supported"] is True
        assert meta["registration_endpoint"] == server.url + "/register"
        assert meta["token_endpoint"] == server.url + "/token"


@pytest.mark.req("gw:oauth")
async def test_a_header_without_bearer_says_so(server: Server) -> None:
    refused = await server.http.post("/mcp", json={}, headers={"Authorization": "alm_pat_" + "x" * 43})
    assert refused.status_code == 401
    assert "Bearer" in refused.json()["error"]["message"] and "space" in refused.json()["error"]["message"]


@pytest.mark.req("gw:oauth")
async def test_registration_gives_public_clients_and_no_secret(server: Server) -> None:
    response = await server.http.post(
        "/register",
        json={"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "client_secret_post"},
    )
    assert response.status_code == 201
    record = response.json()
    assert record["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in record
    assert server.store.oauth.client(record["client_id"]) is not None
    assert any(e.kind == "oauth.register" for e in server.store.audit_log.events())
    bad = await server.http.post("/register", json={"redirect_uris": ["http://evil.example/cb"]})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_redirect_uri"
    empty = await server.http.post("/register", json={"client_name": "x"})
    assert empty.status_code == 400 and empty.json()["error"] == "invalid_client_metadata"


@pytest.mark.req("gw:oauth")
async def test_unused_registrations_are_collected_on_later_registrations(server: Server) -> None:
    first = await _register(server)
    server.clock.now += 86400 + 1
    await _register(server)
    assert server.store.oauth.client(first) is None


async def _authorize(server: Server, **params: str) -> httpx.Response:
    return await server.http.get("/authorize", params=params)


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_authorize_refuses_missing_or_plain_pkce(server: Server) -> None:
    client_id = await _register(server)
    base = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": "s1"}
    for extra in ({}, {"code_challenge": "abc", "code_challenge_method": "plain"}):
        response = await _authorize(server, **base, **extra)
        assert response.status_code == 302
        answer = parse_qs(urlsplit(response.headers["location"]).query)
        assert answer["error"] == ["invalid_request"] and answer["state"] == ["s1"]
        assert response.headers["location"].startswith(REDIRECT)
    _, challenge = pkce()
    ok = await _authorize(server, **base, code_challenge=challenge, code_challenge_method="S256")
    assert ok.status_code == 302 and urlsplit(ok.headers["location"]).path == "/consent"


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_authorize_never_redirects_to_an_unregistered_uri(server: Server) -> None:
    client_id = await _register(server)
    _, challenge = pkce()
    for uri in ("https://evil.example/callback", "http://127.0.0.1:9/other", "http://localhost:9/callback"):
        response = await _authorize(
            server, response_type="code", client_id=client_id, redirect_uri=uri, code_challenge=challenge
        )
        assert response.status_code == 400, uri
        assert "location" not in response.headers
        assert "not one this client registered" in response.json()["error_description"]
    unknown = await _authorize(
        server, response_type="code", client_id="dcr_nobody", redirect_uri=REDIRECT, code_challenge=challenge
    )
    assert unknown.status_code == 400 and "location" not in unknown.headers


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_authorize_refuses_another_resource(server: Server) -> None:
    client_id = await _register(server)
    _, challenge = pkce()
    response = await _authorize(
        server,
        response_type="code",
        client_id=client_id,
        redirect_uri=REDIRECT,
        code_challenge=challenge,
        resource="https://other.example/mcp",
        state="xyz-state",
    )
    assert response.status_code == 302
    answer = parse_qs(urlsplit(response.headers["location"]).query)
    assert answer["error"] == ["invalid_target"]
    assert answer["state"] == ["xyz-state"]  # the client matches the answer to its request by it
    assert answer["iss"] == [server.url]  # RFC 9207 on errors too


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_token_refuses_missing_or_wrong_verifier_and_a_reused_code(server: Server) -> None:
    client_id = await _register(server)
    verifier, challenge = pkce()
    code = _code(server, client_id, challenge)
    missing = await _exchange(server, client_id, code, None)
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
    wrong = await _exchange(server, client_id, code, pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    # a wrong verifier used the code up: one try only, even for whoever holds the right verifier
    after_wrong = await _exchange(server, client_id, code, verifier)
    assert after_wrong.status_code == 400 and after_wrong.json() == {
        "error": "invalid_grant",
        "error_description": "authorization code was already used up; start the sign-in again",
    }
    assert [e.kind for e in server.store.audit_log.events(limit=1)] == ["oauth.code_spent"]
    code = _code(server, client_id, challenge)
    other_redirect = await _exchange(server, client_id, code, verifier, redirect_uri="http://127.0.0.1:9/x")
    assert other_redirect.status_code == 400
    other_resource = await _exchange(server, client_id, code, verifier, resource="https://other.example/mcp")
    assert other_resource.status_code == 400 and other_resource.json()["error"] == "invalid_target"
    good = await _exchange(server, client_id, code, verifier, resource=server.url + "/mcp")
    assert good.status_code == 200, good.text
    tokens = good.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600 and tokens["refresh_token"]
    reused = await _exchange(server, client_id, code, verifier)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    # reuse of the code revoked what it had issued
    assert (await _mcp(server, tokens["access_token"])).status_code == 401


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_a_code_expires(server: Server) -> None:
    client_id = await _register(server)
    verifier, challenge = pkce()
    code = _code(server, client_id, challenge)
    server.clock.now += 121
    expired = await _exchange(server, client_id, code, verifier)
    assert expired.status_code == 400 and "expired" in expired.json()["error_description"]


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_refresh_rotation_reuse_and_revocation_over_http(server: Server) -> None:
    client_id = await _register(server)
    verifier, challenge = pkce()
    first = (await _exchange(server, client_id, _code(server, client_id, challenge), verifier)).json()

    async def refresh(token: str) -> httpx.Response:
        form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id}
        return await server.http.post("/token", data=form)

    second = await refresh(first["refresh_token"])
    assert second.status_code == 200
    assert second.json()["refresh_token"] != first["refresh_token"]
    reuse = await refresh(first["refresh_token"])
    assert reuse.status_code == 400 and "already used" in reuse.json()["error_description"]
    assert (await refresh(second.json()["refresh_token"])).status_code == 400
    assert any(e.kind == "oauth.refresh_reuse" for e in server.store.audit_log.events())

    third = (await _exchange(server, client_id, _code(server, client_id, challenge), verifier)).json()
    revoked = await server.http.post(
        "/revoke",
        data={"token": third["refresh_token"], "client_id": client_id, "token_type_hint": "refresh_token"},
    )
    assert revoked.status_code == 200
    assert (await refresh(third["refresh_token"])).status_code == 400
    assert (await _mcp(server, third["access_token"])).status_code == 401


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_mcp_refuses_expired_tokens_and_tokens_for_another_resource(server: Server) -> None:
    client_id = await _register(server)
    verifier, challenge = pkce()
    elsewhere = _code(server, client_id, challenge, resource="https://other.example/mcp")
    foreign = (await _exchange(server, client_id, elsewhere, verifier)).json()
    refused = await _mcp(server, foreign["access_token"])
    assert refused.status_code == 401
    assert "issued for https://other.example/mcp" in refused.json()["error"]["message"]
    assert any(e.detail.get("reason") == "token audience mismatch" for e in server.store.audit_log.events())

    ours = (await _exchange(server, client_id, _code(server, client_id, challenge), verifier)).json()
    assert (await _mcp(server, ours["refresh_token"])).status_code == 401  # a refresh token is no bearer
    server.clock.now += 3601
    expired = await _mcp(server, ours["access_token"])
    assert expired.status_code == 401 and 'error="invalid_token"' in expired.headers["www-authenticate"]


@pytest.mark.req("gw:oauth", "gw:signin")
async def test_a_refused_authorize_is_a_page_for_a_browser_and_json_for_a_program(server: Server) -> None:
    """Where the spec forbids redirecting (unknown client, unregistered redirect URI) a browser gets
    a page saying what went wrong and what to do; any other caller keeps the JSON error. Errors the
    spec sends back to the client still go back by redirect."""
    client_id = await _register(server)
    _, challenge = pkce()
    bad_uri = {"response_type": "code", "client_id": client_id, "code_challenge": challenge}
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    for params in (
        {**bad_uri, "redirect_uri": "https://evil.example/cb"},
        {**bad_uri, "client_id": "dcr_nobody"},
    ):
        page = await server.http.get("/authorize", params=params, headers=browser)
        assert page.status_code == 400 and "location" not in page.headers
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert "Go back to your AI client and add this server again" in page.text
        assert "{" not in page.text.split("<main", 1)[1]  # no raw JSON on the page
        program = await server.http.get("/authorize", params=params)
        assert program.status_code == 400 and program.json()["error"] in ("invalid_request", "invalid_client")
    redirected = await server.http.get(
        "/authorize",
        params={"client_id": client_id, "redirect_uri": "http://127.0.0.1/callback", "response_type": "code"},
        headers=browser,
    )  # no PKCE: the client hears about it at its redirect URI, as the spec says
    assert redirected.status_code == 302 and "error=" in redirected.headers["location"]
