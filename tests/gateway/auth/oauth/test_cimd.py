"""Client ID metadata documents: fetched from a real local HTTP server, with the SSRF guards, the
size cap, the timeout and the checks on the document itself."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.auth.limits import AddressLimits
from gateway.auth.oauth import cimd
from gateway.auth.oauth.config import CimdPolicy, OAuthConfig, OAuthServer
from gateway.auth.oauth.provider import Provider
from gateway.control.records import TokenLifetimes
from gateway.control.store import ControlPlane
from gateway.headers import OriginPolicy
from tests.gateway.inproc import serving

pytestmark = pytest.mark.anyio

OPEN = CimdPolicy(timeout=2.0, max_bytes=4096, allow_private=True)
GUARDED = CimdPolicy(timeout=2.0, max_bytes=4096, allow_private=False)


def _doc(client_id: str, **extra: object) -> dict[str, object]:
    return {"client_id": client_id, "client_name": "Local", "redirect_uris": ["http://127.0.0.1/cb"], **extra}


FETCHES: list[str] = []


@pytest.fixture
async def docs() -> AsyncIterator[str]:
    hang = anyio.Event()

    async def good(request: Request) -> Response:
        FETCHES.append(str(request.url))
        return JSONResponse(_doc(str(request.url)), headers={"Cache-Control": "max-age=120"})

    async def wrong_id(request: Request) -> Response:
        return JSONResponse(_doc("https://someone-else.example/client.json"))

    async def big(request: Request) -> Response:
        return JSONResponse(_doc(str(request.url), padding="x" * 10_000))

    async def slow(request: Request) -> Response:
        await hang.wait()  # released when the test ends
        return JSONResponse({})

    async def secret(request: Request) -> Response:
        return JSONResponse(_doc(str(request.url), token_endpoint_auth_method="client_secret_basic"))

    app = Starlette(
        routes=[
            Route("/good.json", good),
            Route("/wrong.json", wrong_id),
            Route("/big.json", big),
            Route("/slow.json", slow),
            Route("/secret.json", secret),
        ]
    )
    async with serving(app) as url:
        yield url
        hang.set()


@pytest.mark.req("gw:oauth")
async def test_a_document_is_fetched_checked_and_cached_for_its_max_age(docs: str) -> None:
    found = await cimd.fetch(docs + "/good.json", OPEN)
    assert found.metadata["client_name"] == "Local"
    assert found.metadata["token_endpoint_auth_method"] == "none"
    assert found.cache_for == 120


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_loopback_and_private_addresses_are_refused_unless_allowed(docs: str) -> None:
    with pytest.raises(cimd.CimdRefused, match="https"):
        await cimd.fetch(docs + "/good.json", GUARDED)  # plain http
    with pytest.raises(cimd.CimdRefused, match="private or reserved"):
        await cimd.resolve("127.0.0.1", 443, GUARDED)
    with pytest.raises(cimd.CimdRefused, match="private or reserved"):
        await cimd.resolve("localhost", 443, GUARDED)
    for address in ("10.0.0.1", "192.168.1.1", "169.254.169.254", "::1", "fd00::1", "::ffff:127.0.0.1"):
        assert not cimd.address_allowed(address, GUARDED), address
    assert cimd.address_allowed("93.184.216.34", GUARDED)


@pytest.mark.req("gw:oauth", "sec:authz")
async def test_bad_documents_are_refused(docs: str) -> None:
    with pytest.raises(cimd.CimdRefused, match="client_id must be"):
        await cimd.fetch(docs + "/wrong.json", OPEN)
    with pytest.raises(cimd.CimdRefused, match="over 4096 bytes"):
        await cimd.fetch(docs + "/big.json", OPEN)
    with pytest.raises(cimd.CimdRefused, match="not supported"):
        await cimd.fetch(docs + "/secret.json", OPEN)
    with pytest.raises(cimd.CimdRefused, match="HTTP 404"):
        await cimd.fetch(docs + "/missing.json", OPEN)
    quick = CimdPolicy(timeout=0.3, max_bytes=4096, allow_private=True)
    with pytest.raises(cimd.CimdRefused, match=r"longer than 0\.3 s"):
        await cimd.fetch(docs + "/slow.json", quick)


@pytest.mark.req("gw:oauth")
def test_client_id_urls_and_documents_are_checked() -> None:
    for bad in (
        "https://example.com",
        "https://example.com/",
        "https://u:p@example.com/c",
        "ftp://x.example/c",
    ):
        with pytest.raises(cimd.CimdRefused):
            cimd.check_url(bad, GUARDED)
    assert cimd.check_url("https://example.com/client.json", GUARDED) == ("https", "example.com", 443)
    with pytest.raises(cimd.CimdRefused, match="plain http"):
        cimd.validate_document(
            "https://a.example/c",
            json.dumps({"client_id": "https://a.example/c", "redirect_uris": ["http://x/cb"]}).encode(),
        )
    assert cimd.cache_seconds("no-store") == cimd.MIN_CACHE
    assert cimd.cache_seconds("max-age=999999") == cimd.MAX_CACHE
    assert cimd.cache_seconds(None) == cimd.DEFAULT_CACHE


@pytest.mark.req("gw:oauth")
async def test_the_provider_caches_a_document_until_its_max_age(docs: str, store: ControlPlane) -> None:
    clock = [1_900_000_000.0]
    config = OAuthConfig(TokenLifetimes(60, 3600), code_ttl=60, unused_client_ttl=60, cimd=OPEN)
    policy = OriginPolicy(public_url=None, origins=frozenset(), hosts=frozenset(), loopback=True)
    provider = Provider(
        OAuthServer(store, config, policy, lambda: clock[0], AddressLimits({}, clock=time.time)),
        "http://127.0.0.1",
    )
    client_id = docs + "/good.json"
    FETCHES.clear()
    first = await provider.client(client_id)
    assert first is not None and first.client_name == "Local"
    await provider.client(client_id)
    assert len(FETCHES) == 1
    clock[0] += 121
    await provider.client(client_id)
    assert len(FETCHES) == 2
    assert await provider.get_client(docs + "/wrong.json") is None
