"""``POST /register`` and ``/token`` against strangers (``sec:authz``, ``gw:oauth``): a real gateway
in this process on port 0, with an injected clock, called over real HTTP from more than one loopback
address — rate limits by address, small fields, the redirect URIs refused as sent, and unused
registrations collected."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import create_app
from gateway.control.records import ConsentChoice
from gateway.control.store import ControlPlane
from tests.gateway.auth.oauth.test_endpoints import Clock
from tests.gateway.conftest import make_settings
from tests.gateway.inproc import serving

pytestmark = [pytest.mark.anyio, pytest.mark.req("sec:authz", "gw:oauth")]

GOOD = {"client_name": "Test client", "redirect_uris": ["http://127.0.0.1/callback"]}


@dataclass
class Server:
    url: str
    store: ControlPlane
    clock: Clock

    def client(self, address: str = "127.0.0.1") -> httpx.AsyncClient:
        """A client whose connections come from ``address`` (any of 127.0.0.0/8 reaches us)."""
        transport = httpx.AsyncHTTPTransport(local_address=address)
        return httpx.AsyncClient(base_url=self.url, transport=transport, timeout=30)

    def clients(self) -> int:
        row = self.store._db.execute("SELECT count(*) FROM oauth_clients").fetchone()
        assert row is not None
        return int(row[0])


Start = Callable[..., AbstractAsyncContextManager[Server]]


@pytest.fixture
def start(data_dir: Path) -> Start:
    @asynccontextmanager
    async def run(**settings: Any) -> AsyncIterator[Server]:
        clock = Clock()
        settings = {"engine_warm_spare": False, **settings}
        app = create_app(make_settings(data_dir, **settings), clock=clock)
        async with serving(app, lifespan="on") as url:
            yield Server(url, app.state.components.store, clock)

    return run


async def test_registrations_are_limited_per_address_with_retry_after(start: Start) -> None:
    async with (
        start(register_rate_limit=3) as server,
        server.client() as one,
        server.client("127.0.0.2") as two,
    ):
        for _ in range(3):
            assert (await one.post("/register", json=GOOD)).status_code == 201
        refused = await one.post("/register", json=GOOD)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "20"  # one more in a minute's third
        assert refused.json() == {
            "error": "rate_limited",
            "error_description": "too many client registrations from your address (at most 3 a minute); "
            "try again in 20 s",
        }
        assert server.clients() == 3  # the refused one stored nothing
        assert (await two.post("/register", json=GOOD)).status_code == 201  # another address is not held
        server.clock.now += 20
        assert (await one.post("/register", json=GOOD)).status_code == 201
        assert (await one.post("/register", json=GOOD)).status_code == 429


async def test_token_and_revoke_share_a_limit_per_address(start: Start) -> None:
    async with start(token_rate_limit=2) as server, server.client() as http:
        form = {"grant_type": "refresh_token", "refresh_token": "nope", "client_id": "dcr_nobody"}
        assert (await http.post("/token", data=form)).status_code in (400, 401)
        assert (await http.post("/revoke", data={"token": "x", "client_id": "dcr_nobody"})).status_code == 401
        refused = await http.post("/token", data=form)
        assert refused.status_code == 429 and refused.json()["error"] == "rate_limited"
        assert int(refused.headers["retry-after"]) == 30


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"client_name": "x" * 201}, "client_name is 201 characters long; at most 200 are accepted"),
        ({"client_uri": "https://a.example/" + "p" * 2000}, "client_uri is 2018 characters long"),
        (
            {"redirect_uris": [f"http://127.0.0.1/cb{n}" for n in range(11)]},
            "redirect_uris lists 11 values; at most 10 are accepted",
        ),
        ({"contacts": ["a@example.com"] * 6}, "contacts lists 6 values; at most 5 are accepted"),
        ({"scope": "memory " * 40}, "scope is 280 characters long; at most 200 are accepted"),
        ({"jwks": {"keys": [{"n": "x" * 5000}]}}, "jwks is larger than 4096 bytes"),
    ],
)
async def test_client_metadata_fields_are_small(start: Start, extra: dict[str, Any], says: str) -> None:
    async with start() as server, server.client() as http:
        refused = await http.post("/register", json={**GOOD, **extra})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == "invalid_client_metadata"
        assert refused.json()["error_description"].startswith(says)
        assert server.clients() == 0


async def test_the_largest_accepted_fields_register_and_a_large_body_is_refused(start: Start) -> None:
    async with start() as server, server.client() as http:
        largest = {**GOOD, "client_name": "n" * 200, "contacts": ["c" * 320] * 5}
        assert (await http.post("/register", json=largest)).status_code == 201
        huge = await http.post("/register", json={**GOOD, "client_name": "x" * 65536})
        assert huge.status_code == 413 and huge.json() == {
            "error": "invalid_client_metadata",
            "error_description": "registration requests are limited to 16384 bytes",
        }
        for body in (b"[1]", b"not json"):
            bad = await http.post("/register", content=body)
            assert bad.status_code == 400 and "JSON object" in bad.json()["error_description"]
        assert server.clients() == 1


@pytest.mark.parametrize(
    "uri",
    [
        "https:///cb",
        "HTTPS:///cb",
        "https:/cb",
        "mailto:owner@example.com",
        "jar:https://evil.example/a.jar!/cb",
        "view-source:https://evil.example/cb",
        "chrome://settings/cb",
        "chrome-extension://abcdef/cb",
        "javascript:alert(1)//",
        "data:text/html,<script>1</script>",
        "file:///etc/passwd",
        "tel:+15555550100",
        "about:blank",
        "https://user@evil.example/cb",
        "https://evil.example\\@good.example/cb",
        "https://good.example/cb#frag",
        "http://evil.example/cb",
        "myapp:callback",
        "https://good example/cb",
    ],
)
async def test_a_redirect_uri_that_is_not_a_web_or_app_callback_is_refused(start: Start, uri: str) -> None:
    async with start() as server, server.client() as http:
        refused = await http.post("/register", json={**GOOD, "redirect_uris": [uri]})
        assert refused.status_code == 400, (uri, refused.text)
        assert refused.json()["error"] == "invalid_redirect_uri"
        assert repr(uri) in refused.json()["error_description"]
        assert server.clients() == 0


@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai/api/mcp/auth_callback",
        "http://localhost:6274/oauth/callback",
        "http://[::1]/cb",
        "cursor://anysphere.cursor-mcp/oauth/callback",
        "vscode://vscode.github-authentication/did-authenticate",
        "com.example.app:/oauth2redirect",
    ],
)
async def test_web_and_app_callbacks_register_as_sent(start: Start, uri: str) -> None:
    async with start() as server, server.client() as http:
        made = await http.post("/register", json={**GOOD, "redirect_uris": [uri]})
        assert made.status_code == 201, made.text
        stored = server.store.oauth.client(made.json()["client_id"])
        assert stored is not None and stored.metadata["redirect_uris"] == [uri]


def _use(server: Server, client_id: str) -> None:
    """The consent page's record of a grant for ``client_id`` (what makes a client "used")."""
    owner, workspace = server.store.owners.create(f"{secrets.token_hex(4)}@example.com", None)
    server.store.oauth.save_code(
        client_id=client_id,
        choice=ConsentChoice(owner.id, workspace.id, "Test client", read_only=False, scope=None),
        redirect_uri="http://127.0.0.1/callback",
        redirect_explicit=True,
        code_challenge="c",
        resource=server.url + "/mcp",
        scopes=("memory",),
        now=server.clock(),
        ttl=120,
        remote=None,
    )


async def test_unused_registrations_are_forgotten_after_their_time(start: Start) -> None:
    async with start(oauth_unused_client_ttl=3600) as server, server.client() as http:
        unused = (await http.post("/register", json=GOOD)).json()["client_id"]
        used = (await http.post("/register", json=GOOD)).json()["client_id"]
        _use(server, used)
        server.clock.now += 3599
        (await http.post("/register", json=GOOD)).raise_for_status()
        assert server.store.oauth.client(unused) is not None  # not yet
        server.clock.now += 2
        newest = (await http.post("/register", json=GOOD)).json()["client_id"]
        assert server.store.oauth.client(unused) is None
        assert server.store.oauth.client(used) is not None and server.store.oauth.client(newest) is not None


async def test_past_the_cap_the_oldest_unused_registrations_go_first(start: Start) -> None:
    async with start(oauth_max_unused_clients=10, register_rate_limit=100) as server, server.client() as http:
        first = (await http.post("/register", json=GOOD)).json()["client_id"]
        _use(server, first)  # a used client is never counted or collected
        made = []
        for _ in range(13):
            server.clock.now += 1
            made.append((await http.post("/register", json=GOOD)).json()["client_id"])
        kept = [c for c in [first, *made] if server.store.oauth.client(c) is not None]
        assert kept == [first, *made[-10:]]
