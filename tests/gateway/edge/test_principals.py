"""The token cache of the request path (perf:gateway): control-plane lookups off the event loop,
a principal reused for at most a moment, a revocation honoured within one second (PAT and OAuth),
at once when it is made through this gateway."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.types import Receive, Scope, Send

from gateway import layout
from gateway.app import create_app
from gateway.control.records import ConsentChoice, Principal, TokenLifetimes
from gateway.control.store import ControlPlane
from gateway.edge.principals import ForgetAfterChanges, PrincipalCache
from gateway.errors import ControlPlaneUnavailable
from tests.gateway.conftest import make_settings
from tests.gateway.inproc import serving

pytestmark = pytest.mark.anyio

PRINCIPAL = Principal("own_1", "wsp_1", "con_1", "Claude", read_only=False, scope=None)
MAX_BODY = 1024


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


class Lookups:
    """A control plane stand-in that counts its calls and notes the thread they ran on."""

    def __init__(self) -> None:
        self.answer: Principal | None = PRINCIPAL
        self.calls: list[tuple[str, float]] = []
        self.threads: set[int] = set()

    def __call__(self, secret: str, now: float) -> Principal | None:
        self.calls.append((secret, now))
        self.threads.add(threading.get_ident())
        return self.answer


async def test_a_principal_is_reused_only_within_its_ttl_and_looked_up_off_the_loop() -> None:
    lookups, clock = Lookups(), Clock()
    cache = PrincipalCache(lookups, ttl=0.5, clock=clock)
    assert await cache.principal("alm_pat_a") == PRINCIPAL
    assert await cache.principal("alm_pat_a") == PRINCIPAL
    assert len(lookups.calls) == 1 and cache.hits == 1
    assert threading.get_ident() not in lookups.threads  # the query ran on a worker thread
    clock.now += 0.5
    assert await cache.principal("alm_pat_a") == PRINCIPAL
    assert len(lookups.calls) == 2  # stale after ttl: asked again, at the new time
    assert lookups.calls[-1] == ("alm_pat_a", clock.now)
    clock.now -= 10  # the clock went back: nothing remembered is trusted
    await cache.principal("alm_pat_a")
    assert len(lookups.calls) == 3


async def test_a_refused_token_is_never_remembered_and_a_revocation_replaces_the_entry() -> None:
    lookups, clock = Lookups(), Clock()
    cache = PrincipalCache(lookups, ttl=0.5, clock=clock)
    await cache.principal("alm_pat_a")
    lookups.answer = None  # revoked in the control plane
    clock.now += 0.6
    assert await cache.principal("alm_pat_a") is None
    assert await cache.principal("alm_pat_a") is None
    assert len(lookups.calls) == 3 and len(cache) == 0
    for i in range(5):
        await cache.principal(f"alm_pat_stranger{i}")
    assert len(cache) == 0


async def test_forget_drops_everything_and_a_lookup_racing_it_is_not_kept() -> None:
    lookups, clock = Lookups(), Clock()
    cache = PrincipalCache(lookups, ttl=60, clock=clock, max_entries=2)
    for name in ("a", "b", "c"):
        await cache.principal(f"alm_pat_{name}")
    assert len(cache) == 2  # bounded: the oldest went
    cache.forget()
    assert len(cache) == 0

    def forgetting(secret: str, now: float) -> Principal | None:
        cache.forget()  # a revocation lands while this lookup is in flight
        return PRINCIPAL

    cache.lookup = forgetting
    assert await cache.principal("alm_pat_a") == PRINCIPAL
    assert len(cache) == 0


async def test_state_changing_requests_outside_the_memory_traffic_empty_the_cache() -> None:
    lookups = Lookups()
    cache = PrincipalCache(lookups, ttl=60)
    forgotten_at_start: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        forgotten_at_start.append(len(cache))
        await send({"type": "http.response.body", "body": b"ok"})

    wrapped = ForgetAfterChanges(app, cache)
    transport = httpx.ASGITransport(app=wrapped)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        for method, path, kept in [
            ("POST", "/mcp", True),
            ("POST", "/api/v1/memories", True),
            ("GET", "/tokens", True),
            ("POST", "/tokens/con_1/revoke", False),
            ("POST", "/revoke", False),
            ("POST", "/token", False),
        ]:
            await cache.principal("alm_pat_a")
            await http.request(method, path)
            assert (len(cache) == 1) is kept, (method, path)
            assert forgotten_at_start[-1] == (1 if kept else 0)  # before the answer went out


@dataclass
class Served:
    url: str
    store: ControlPlane
    elsewhere: ControlPlane  # another connection to the same control plane: the CLI, another gateway
    http: httpx.AsyncClient
    principals: PrincipalCache


@pytest.fixture
async def served(data_dir: Path) -> AsyncIterator[Served]:
    settings = make_settings(
        data_dir,
        engine_warm_spare=False,
        max_body_bytes=MAX_BODY,
        rate_limit_burst=100_000,
        rate_limit_per_second=100_000,
    )
    app = create_app(settings)
    async with serving(app, lifespan="on") as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
        elsewhere = ControlPlane.open(layout.control_db(data_dir.resolve()))
        try:
            yield Served(url, app.state.components.store, elsewhere, http, app.state.principals)
        finally:
            elsewhere.close()


async def accepted(served: Served, token: str) -> bool:
    """Whether ``token`` is accepted at /mcp, without waking an engine: a body over the size cap
    is refused (413) only after the token was checked (401 comes first)."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + b"x" * MAX_BODY + b'"}'
    response = await served.http.post(
        "/mcp", content=body, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    )
    assert response.status_code in (401, 413), response.text
    return response.status_code == 413


async def refused_within(served: Served, token: str, limit_s: float) -> float:
    """Seconds from now until /mcp refuses ``token`` (polled; fails past ``limit_s``)."""
    began = time.monotonic()
    while await accepted(served, token):
        assert time.monotonic() - began <= limit_s, f"{token[:12]}… still accepted after {limit_s} s"
        await anyio.sleep(0.01)
    return time.monotonic() - began


async def oauth_tokens(served: Served) -> tuple[str, str, str]:
    """(client id, access token, refresh token): a client registered at /register, and a grant
    made as the consent page would make it."""
    body = {"client_name": "Agent", "redirect_uris": ["http://127.0.0.1:9/callback"]}
    registered = await served.http.post("/register", json=body)
    assert registered.status_code == 201, registered.text
    client_id = str(registered.json()["client_id"])
    owner, workspace = served.elsewhere.owners.create("oauth@example.com", None)
    code = served.elsewhere.oauth.save_code(
        client_id=client_id,
        choice=ConsentChoice(owner.id, workspace.id, "Agent", read_only=False, scope=None),
        redirect_uri="http://127.0.0.1:9/callback",
        redirect_explicit=True,
        code_challenge="challenge",
        resource=served.url + "/mcp",
        scopes=("memory",),
        now=time.time(),
        ttl=60,
        remote=None,
    )
    lifetimes = TokenLifetimes(access=600, refresh=86400)
    issued = served.elsewhere.oauth.exchange_code(code, now=time.time(), lifetimes=lifetimes)
    return client_id, issued.access_token, issued.refresh_token


@pytest.mark.req("perf:gateway")
async def test_a_pat_revoked_elsewhere_is_refused_within_one_second(served: Served) -> None:
    owner, workspace = served.elsewhere.owners.create("ada@example.com", None)
    _, token = served.elsewhere.connections.create_pat(owner.id, workspace.id, "laptop")
    for _ in range(5):
        assert await accepted(served, token)
    assert served.principals.hits >= 4  # served from the cache, not a query per request
    served.elsewhere.connections.revoke(owner.id, "laptop")  # the CLI's way: straight into the control plane
    await refused_within(served, token, 1.0)


@pytest.mark.req("perf:gateway")
async def test_an_oauth_token_revoked_elsewhere_is_refused_within_one_second(served: Served) -> None:
    _, access, _ = await oauth_tokens(served)
    for _ in range(5):
        assert await accepted(served, access)
    assert served.principals.hits >= 4
    served.elsewhere.oauth.revoke_token(access, now=time.time())
    await refused_within(served, access, 1.0)


@pytest.mark.req("perf:gateway")
async def test_a_revocation_through_this_gateway_is_honoured_by_the_next_request(served: Served) -> None:
    client_id, access, refresh = await oauth_tokens(served)
    assert await accepted(served, access) and await accepted(served, access)
    revoked = await served.http.post("/revoke", data={"token": refresh, "client_id": client_id})
    assert revoked.status_code == 200
    assert not await accepted(served, access)  # no wait at all: this gateway emptied its cache


class Unreachable(Lookups):
    """The lookup once the control plane went away."""

    down = False

    def __call__(self, secret: str, now: float) -> Principal | None:
        if self.down:
            raise ControlPlaneUnavailable("the control plane cannot be reached", retry_after=2.0)
        return super().__call__(secret, now)


@pytest.mark.req("run:scale-out")
async def test_while_the_control_plane_is_down_a_token_verified_within_30_s_is_still_accepted() -> None:
    clock, lookups = Clock(), Unreachable()
    cache = PrincipalCache(lookups, clock=clock)
    assert await cache.principal("known") == PRINCIPAL
    lookups.down = True
    clock.now += 29.9
    assert await cache.principal("known") == PRINCIPAL  # verified 29.9 s ago
    with pytest.raises(ControlPlaneUnavailable):
        await cache.principal("never-seen")
    clock.now += 0.1
    with pytest.raises(ControlPlaneUnavailable):  # 30 s after it was verified: no longer
        await cache.principal("known")
    lookups.down = False
    assert await cache.principal("known") == PRINCIPAL
