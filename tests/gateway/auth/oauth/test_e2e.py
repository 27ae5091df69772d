"""The whole sign-in flow against the running gateway process, as a client would do it: discovery
from the 401, registration (and separately a client ID metadata document served locally), sign-in,
consent, code exchange with PKCE, tool calls through the gateway, refresh with rotation, reuse
detection, revocation — and the memory written shows the connection's name as its source."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlencode

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.gateway.auth.oauth.flow import approve, callback_params, discover, pkce
from tests.gateway.e2e import Gateway, connect, data, files_containing, start_gateway
from tests.gateway.inproc import serving

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EMAIL, PASSWORD = "ada@example.com", "correct horse battery staple"
CALLBACK = "http://127.0.0.1:{port}/callback"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("oauth")
    gw = start_gateway(
        root / "data", root / "gateway.log", engine_warm_spare="false", oauth_cimd_allow_private="true"
    )
    gw.cli("owner", "create", EMAIL, stdin=PASSWORD + "\n")
    yield gw
    gw.stop()


@pytest.fixture
async def browser(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """A browser's HTTP: keeps cookies, follows nothing by itself."""
    async with httpx.AsyncClient(timeout=30, headers={"Accept": "text/html"}) as client:
        yield client


def _fact(obj: str) -> dict[str, object]:
    return {"statement": f"Fjord is {obj}", "subject": "Fjord", "predicate": "is", "object": obj}


async def _token(http: httpx.AsyncClient, endpoint: str, **form: str) -> httpx.Response:
    return await http.post(endpoint, data=form)


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_registration_sign_in_consent_tokens_refresh_reuse_and_revocation(
    gateway: Gateway, browser: httpx.AsyncClient
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        found = await discover(http, gateway.mcp_url)
        assert found.resource == gateway.mcp_url and found.issuer == gateway.url
        meta = found.metadata
        redirect = CALLBACK.format(port=43117)
        registered = await http.post(
            meta["registration_endpoint"],
            json={"client_name": "Fjord agent app", "redirect_uris": ["http://127.0.0.1/callback"]},
        )
        assert registered.status_code == 201
        client_id = registered.json()["client_id"]

        verifier, challenge = pkce()
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "xyz",
            "scope": "memory",
            "resource": found.resource,
        }
        back = await approve(
            browser,
            meta["authorization_endpoint"] + "?" + urlencode(query),
            email=EMAIL,
            password=PASSWORD,
            name="Fjord agent",
        )
        assert back.startswith(redirect + "?")
        answer = callback_params(back)
        assert answer["state"] == "xyz" and answer["iss"] == found.issuer

        exchange = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "client_id": client_id,
            "redirect_uri": redirect,
            "code_verifier": verifier,
            "resource": found.resource,
        }
        first = await _token(http, meta["token_endpoint"], **exchange)
        assert first.status_code == 200, first.text
        tokens = first.json()

        async with connect(gateway, tokens["access_token"]) as client:
            receipt = data(await client.call_tool("remember", _fact("cold-oauth-value")))
        assert (receipt["source"], receipt["source_verified"]) == ("Fjord agent", True)
        written = files_containing(gateway.workspace_dir(EMAIL), "cold-oauth-value")
        assert written and any("Fjord agent" in p.read_text() for p in written)

        listed = gateway.cli("token", "list", "--owner", EMAIL)
        assert "Fjord agent" in listed

        # refresh rotates: the new pair works, the old refresh token is spent
        refresh = {
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client_id,
        }
        second = await _token(http, meta["token_endpoint"], **refresh)
        assert second.status_code == 200
        rotated = second.json()
        assert rotated["refresh_token"] != tokens["refresh_token"]
        async with connect(gateway, rotated["access_token"]) as client:
            data(await client.call_tool("remember", _fact("still-oauth-value")))

        # presenting the old refresh token again revokes the whole family
        reused = await _token(http, meta["token_endpoint"], **refresh)
        assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
        gone = await http.post(
            gateway.mcp_url, json={}, headers={"Authorization": f"Bearer {rotated['access_token']}"}
        )
        assert gone.status_code == 401
        audit = gateway.cli("audit", "--owner", EMAIL)
        assert "oauth.refresh_reuse" in audit and "oauth.grant" in audit

        # a second grant, revoked by the client at /revoke
        verifier, challenge = pkce()
        query.update(code_challenge=challenge, state="second")
        back = await approve(
            browser, meta["authorization_endpoint"] + "?" + urlencode(query), email=EMAIL, password=PASSWORD,
            name="Fjord agent",
        )  # fmt: skip
        exchange.update(code=callback_params(back)["code"], code_verifier=verifier)
        again = (await _token(http, meta["token_endpoint"], **exchange)).json()
        revoked = await http.post(
            meta["revocation_endpoint"], data={"token": again["refresh_token"], "client_id": client_id}
        )
        assert revoked.status_code == 200
        after = await http.post(
            gateway.mcp_url, json={}, headers={"Authorization": f"Bearer {again['access_token']}"}
        )
        assert after.status_code == 401


@pytest.fixture
async def metadata_document() -> AsyncIterator[str]:
    """A client ID metadata document served locally (the gateway fetches it over loopback, which
    ``oauth_cimd_allow_private`` permits for this test)."""

    async def document(request: Request) -> Response:
        return JSONResponse(
            {
                "client_id": str(request.url),
                "client_name": "Metadata Client",
                "redirect_uris": ["http://127.0.0.1/cimd-callback"],
                "token_endpoint_auth_method": "none",
            }
        )

    async with serving(Starlette(routes=[Route("/oauth/client.json", document)])) as url:
        yield url + "/oauth/client.json"


@pytest.mark.req("gw:oauth")
async def test_a_client_id_metadata_document_client_signs_in(
    gateway: Gateway, browser: httpx.AsyncClient, metadata_document: str
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        found = await discover(http, gateway.mcp_url)
        verifier, challenge = pkce()
        redirect = "http://127.0.0.1:50999/cimd-callback"
        query = {
            "response_type": "code",
            "client_id": metadata_document,
            "redirect_uri": redirect,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": found.resource,
        }
        consent = await browser.get(found.metadata["authorization_endpoint"] + "?" + urlencode(query))
        assert consent.status_code == 302
        back = await approve(
            browser,
            found.metadata["authorization_endpoint"] + "?" + urlencode(query),
            email=EMAIL,
            password=PASSWORD,
            name="Metadata laptop",
            read_only=True,
        )
        code = callback_params(back)["code"]
        exchanged = await _token(
            http,
            found.metadata["token_endpoint"],
            grant_type="authorization_code",
            code=code,
            client_id=metadata_document,
            redirect_uri=redirect,
            code_verifier=verifier,
        )
        assert exchanged.status_code == 200, exchanged.text
        async with connect(gateway, exchanged.json()["access_token"]) as client:
            refused = await client.call_tool("remember", _fact("read-only-value"))
            assert refused.is_error  # read-only, as chosen on the consent page
            status = data(await client.call_tool("memory_status", {}))
        assert status


class MemoryStorage:
    """Token storage for the SDK's OAuth client, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.mark.req("gw:oauth")
async def test_the_mcp_python_client_connects_given_only_the_url(
    gateway: Gateway, browser: httpx.AsyncClient
) -> None:
    """The official client's own OAuth support: it discovers, registers, opens the authorization URL
    (here: a 'browser' that signs in and approves the consent form) and exchanges the code."""
    landed: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        landed.append(
            await approve(browser, authorization_url, email=EMAIL, password=PASSWORD, name="SDK client")
        )

    async def callback_handler() -> AuthorizationCodeResult:
        params = callback_params(landed[-1])
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=gateway.mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="MCP Python SDK",
            redirect_uris=[AnyUrl("http://127.0.0.1:45678/callback")],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope="memory",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=30) as http,
        Client(streamable_http_client(gateway.mcp_url, http_client=http)) as client,
    ):
        receipt = data(await client.call_tool("remember", _fact("sdk-oauth-value")))
    assert receipt["source"] == "SDK client"
    assert len(landed) == 1 and storage.tokens is not None and storage.tokens.refresh_token
    assert storage.client is not None and storage.client.token_endpoint_auth_method == "none"
