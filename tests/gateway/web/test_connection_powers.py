"""What the pages say about a connection's powers is what it can do (``gw:isolation``,
``sec:authz``), through the real gateway process, the real MCP client and the REST API.

The new-token page and the consent page each offer a pin with two choices — "this scope only" and
"this scope and unscoped memories" — and say that a pinned connection "writes, retires and
restores only memories in that scope"; the Connections page shows the choice. For each page and
each choice a connection is made there and its powers exercised over MCP and REST: it reads its
own scope, reads unscoped memories exactly when that was chosen, never reads another scope, writes
only into its scope, and retires and restores only its own scope's memories.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import pytest

from tests.gateway.auth.oauth.flow import approve, callback_params, discover, pkce, sign_in
from tests.gateway.e2e import Gateway, connect, data, files_containing, refusal, start_gateway
from tests.gateway.web.conftest import csrf_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.req("gw:isolation", "sec:authz")]

EMAIL, PASSWORD = "pia@example.com", "pins and needles 42"
SCOPE, OTHER = "project:a", "project:b"
TOKEN_HINT = "If set, this token writes, retires and restores only memories in that scope"
CONSENT_HINT = "If set, this connection writes, retires and restores only memories in that scope."
CHOICES = {"scope": "this scope only", "unscoped": "this scope and unscoped memories"}
REDIRECT = "http://127.0.0.1:43118/callback"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("powers")
    gw = start_gateway(
        root / "data",
        root / "gateway.log",
        engine_warm_spare="false",
        rate_limit_burst="10000",
        rate_limit_per_second="10000",
    )
    gw.cli("owner", "create", EMAIL, "--password-stdin", stdin=PASSWORD + "\n")
    yield gw
    gw.stop()


@pytest.fixture
async def browser(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60, headers={"Accept": "text/html"}) as client:
        yield client


@pytest.fixture(scope="module")
def full(gateway: Gateway) -> str:
    """An unpinned token of the owner."""
    return gateway.token(EMAIL, "owner's own")


@pytest.fixture(scope="module")
def seeded(gateway: Gateway, full: str) -> dict[str, str]:
    """Memories written by an unpinned token: unscoped (a note, a fact, a retired note), in the pinned
    scope, and in another scope."""

    async def seed() -> dict[str, str]:
        async with connect(gateway, full) as c:
            ids = {
                "unscoped": data(await c.call_tool("remember", {"statement": "harbour unscopedmark note"}))[
                    "id"
                ],
                "retired": data(await c.call_tool("remember", {"statement": "harbour unscopedmark old"}))[
                    "id"
                ],
                "fact": data(
                    await c.call_tool(
                        "save_memory",
                        {"subject": "Harbour", "predicate": "keeper", "object": "unscopedmark Ona"},
                    )
                )["id"],
                "own": data(
                    await c.call_tool("remember", {"statement": "harbour ownmark note", "scope": SCOPE})
                )["id"],
                "other": data(
                    await c.call_tool("remember", {"statement": "harbour othermark note", "scope": OTHER})
                )["id"],
            }
            data(await c.call_tool("retire_memory", {"id": ids["retired"]}))
        return ids

    return anyio.run(seed)


def pin_choice_of(html: str) -> str:
    """Which pin choice a form has checked."""
    found = re.findall(r'<input id="reads-(\w+)" type="radio" name="reads" value="\w+"( checked)?>', html)
    (checked,) = [value for value, mark in found if mark]
    return str(checked)


async def check_mcp(gateway: Gateway, token: str, unscoped: bool, ids: dict[str, str], who: str) -> None:
    async with connect(gateway, token) as c:
        context = json.dumps(data(await c.call_tool("get_context", {"query": "harbour note keeper Ona"})))
        assert "ownmark" in context and "othermark" not in context
        assert ("unscopedmark" in context) is unscoped, context
        by_id = await c.call_tool("retrieve_memory", {"id": ids["unscoped"]})
        if unscoped:
            assert data(by_id)["notes"][0]["id"] == ids["unscoped"]
        else:
            assert "[not_found]" in refusal(by_id)
        facts = data(await c.call_tool("retrieve_memory", {"subject": "Harbour"}))["facts"]
        assert [f["id"] for f in facts] == ([ids["fact"]] if unscoped else [])
        assert "[not_found]" in refusal(await c.call_tool("retrieve_memory", {"id": ids["other"]}))
        assert "[forbidden]" in refusal(
            await c.call_tool("get_context", {"query": "harbour", "scope": OTHER})
        )
        # it never retires or restores an unscoped memory (forbidden when it can see it) nor another scope's
        expected = "[forbidden]" if unscoped else "[not_found]"
        for memory in ("unscoped", "fact"):
            assert expected in refusal(await c.call_tool("retire_memory", {"id": ids[memory]}))
        assert expected in refusal(await c.call_tool("restore_memory", {"id": ids["retired"]}))
        assert "[not_found]" in refusal(await c.call_tool("retire_memory", {"id": ids["other"]}))
        # it writes only into its scope, and retires and restores its own scope's memories
        wrote = data(await c.call_tool("remember", {"statement": f"harbour pinned write by {who} over mcp"}))
        assert wrote["scope"] == SCOPE and wrote["source"] == who
        refused = refusal(await c.call_tool("remember", {"statement": "forbiddenwrite", "scope": OTHER}))
        assert "[forbidden]" in refused
        assert data(await c.call_tool("retire_memory", {"id": wrote["id"]}))["action"] == "retire"
        assert data(await c.call_tool("restore_memory", {"id": wrote["id"]}))["action"] == "restore"


def check_rest(gateway: Gateway, token: str, unscoped: bool, ids: dict[str, str], who: str) -> None:
    def api(method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"}
        return httpx.request(method, gateway.url + "/api/v1" + path, headers=headers, timeout=60, **kw)

    def code(response: httpx.Response) -> str:
        return str(response.json()["error"]["code"])

    context = api("POST", "/context", json={"query": "harbour note keeper Ona"}).text
    assert "ownmark" in context and "othermark" not in context
    assert ("unscopedmark" in context) is unscoped
    one = api("GET", f"/memories/{ids['unscoped']}")
    assert one.status_code == (200 if unscoped else 404)
    facts = api("GET", "/memories", params={"subject": "Harbour"}).json()["facts"]
    assert [f["id"] for f in facts] == ([ids["fact"]] if unscoped else [])
    assert api("GET", f"/memories/{ids['other']}").status_code == 404
    listed = {row["id"] for row in api("GET", "/admin/memories", params={"limit": "200"}).json()["items"]}
    assert ids["own"] in listed and ids["other"] not in listed
    assert (ids["unscoped"] in listed) is unscoped and (ids["fact"] in listed) is unscoped
    expected = (403, "forbidden") if unscoped else (404, "not_found")
    for path in (f"/memories/{ids['unscoped']}/retire", f"/memories/{ids['fact']}/retire"):
        r = api("POST", path, json={})
        assert (r.status_code, code(r)) == expected
    r = api("POST", f"/memories/{ids['retired']}/restore")
    assert (r.status_code, code(r)) == expected
    wrote = api("POST", "/memories", json={"statement": f"harbour pinned write by {who} over rest"}).json()
    assert wrote["scope"] == SCOPE and wrote["source"] == who
    r = api("POST", "/memories", json={"statement": "forbiddenwrite", "scope": OTHER})
    assert (r.status_code, code(r)) == (403, "forbidden")
    assert api("POST", f"/memories/{wrote['id']}/retire", json={}).json()["action"] == "retire"
    assert api("POST", f"/memories/{wrote['id']}/restore").json()["action"] == "restore"


async def untouched(gateway: Gateway, full: str, ids: dict[str, str]) -> None:
    """What the pinned connections were refused stayed as it was."""
    async with connect(gateway, full) as c:
        for memory, state in (("unscoped", "live"), ("retired", "retired"), ("other", "live")):
            found = data(await c.call_tool("retrieve_memory", {"id": ids[memory]}))["notes"]
            assert [n["state"] for n in found] == [state]
        assert data(await c.call_tool("retrieve_memory", {"id": ids["fact"]}))["facts"][0]["current"]
    assert files_containing(gateway.workspace_dir(EMAIL), "forbiddenwrite") == []


async def connections_row(browser: httpx.AsyncClient, name: str) -> str:
    page = await browser.get("/connections")
    row = re.search(r'<th scope="row" class="name">' + re.escape(name) + r"</th>(.*?)</tr>", page.text, re.S)
    assert row is not None, page.text
    return row.group(1)


async def test_the_token_page_pins_do_what_it_says_over_mcp_and_rest(
    gateway: Gateway, browser: httpx.AsyncClient, full: str, seeded: dict[str, str]
) -> None:
    await sign_in(browser, gateway.url + "/login", EMAIL, PASSWORD)
    page = await browser.get("/tokens/new")
    assert TOKEN_HINT in page.text
    assert all(f">{label}</label>" in page.text for label in CHOICES.values())
    assert pin_choice_of(page.text) == "scope"  # the narrower one unless the owner picks the other
    for reads, label in CHOICES.items():
        name = f"token {reads}"
        form = {"csrf_token": csrf_of(page.text), "name": name, "workspace": "default", "scope": SCOPE}
        made = await browser.post("/tokens/new", data={**form, "reads": reads})
        assert made.status_code == 201, made.text
        found = re.search(r'id="token" type="text" readonly value="([^"]+)"', made.text)
        assert found is not None
        row = await connections_row(browser, name)
        assert f"<code>{SCOPE}</code>" in row and f"reads {label}" in row
        await check_mcp(gateway, found.group(1), reads == "unscoped", seeded, name)
        check_rest(gateway, found.group(1), reads == "unscoped", seeded, name)
    bad = await browser.post("/tokens/new", data={**form, "name": "odd", "reads": "everything"})
    assert bad.status_code == 400 and "this scope only" in bad.text
    listed = httpx.get(
        gateway.url + "/api/v1/admin/connections", headers={"Authorization": f"Bearer {full}"}, timeout=60
    ).json()["connections"]
    shown = {c["name"]: (c["scope"], c["reads_unscoped"]) for c in listed}
    assert shown["token scope"] == (SCOPE, False) and shown["token unscoped"] == (SCOPE, True)
    assert shown["owner's own"] == (None, False)
    cli = gateway.cli("token", "list", "--owner", EMAIL)
    assert f"\t{SCOPE}\t" in cli and f"\t{SCOPE}+unscoped\t" in cli
    await untouched(gateway, full, seeded)


async def test_the_consent_page_pins_do_what_it_says_over_mcp_and_rest(
    gateway: Gateway, browser: httpx.AsyncClient, full: str, seeded: dict[str, str]
) -> None:
    async with httpx.AsyncClient(timeout=60) as http:
        found = await discover(http, gateway.mcp_url)
        meta = found.metadata
        registered = await http.post(
            meta["registration_endpoint"],
            json={"client_name": "Pin test agent", "redirect_uris": ["http://127.0.0.1/callback"]},
        )
        client_id = registered.json()["client_id"]
        for reads, label in CHOICES.items():
            verifier, challenge = pkce()
            query = {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": REDIRECT,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": reads,
                "resource": found.resource,
            }
            seen: list[str] = []
            name = f"agent {reads}"
            back = await approve(
                browser,
                meta["authorization_endpoint"] + "?" + urlencode(query),
                email=EMAIL,
                password=PASSWORD,
                name=name,
                scope=SCOPE,
                reads=reads,
                seen=seen,
            )
            assert CONSENT_HINT in seen[0] and all(f">{text}</label>" in seen[0] for text in CHOICES.values())
            assert pin_choice_of(seen[0]) == "scope"
            exchange = {
                "grant_type": "authorization_code",
                "code": callback_params(back)["code"],
                "client_id": client_id,
                "redirect_uri": REDIRECT,
                "code_verifier": verifier,
                "resource": found.resource,
            }
            tokens = (await http.post(meta["token_endpoint"], data=exchange)).json()
            row = await connections_row(browser, name)
            assert f"<code>{SCOPE}</code>" in row and f"reads {label}" in row
            await check_mcp(gateway, tokens["access_token"], reads == "unscoped", seeded, name)
            check_rest(gateway, tokens["access_token"], reads == "unscoped", seeded, name)
    await untouched(gateway, full, seeded)
