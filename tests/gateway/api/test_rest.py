"""The REST API end to end: a real gateway, real engines, real HTTP (gw:rest, gw:isolation)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.recall.budget import estimate_tokens
from tests.gateway.e2e import Gateway, connect, data, files_containing, start_gateway

pytestmark = pytest.mark.req("gw:rest")

ADA, BOB = "ada@example.com", "bob@example.com"


def gateway_of_ada_and_bob(tmp: Path, rate: str) -> Iterator[Gateway]:
    """A real gateway in ``tmp`` with two owners, Ada and Bob; ``rate`` calls/s per token (and burst)."""
    gw = start_gateway(tmp / "data", tmp / "gateway.log", rate_limit_burst=rate, rate_limit_per_second=rate)
    try:
        gw.owner(ADA)
        gw.owner(BOB)
        yield gw
    finally:
        gw.stop()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from gateway_of_ada_and_bob(tmp_path_factory.mktemp("rest"), "10000")


@pytest.fixture(scope="module")
def ada(gateway: Gateway) -> str:
    return gateway.token(ADA, "REST script")


def api(gateway: Gateway, token: str | None, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, gateway.url + "/api/v1" + path, headers=headers, timeout=60, **kw)


def error(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["error"]["code"], body["error"]["message"]


def test_write_and_read_back_through_rest_and_mcp(gateway: Gateway, ada: str) -> None:
    note = api(gateway, ada, "POST", "/memories", json={"statement": "The standup moved to 9:30."})
    assert note.status_code == 200 and note.json()["action"] == "store" and note.json()["kind"] == "note"
    assert note.json()["source"] == "REST script" and note.json()["source_verified"] is True
    one = api(gateway, ada, "GET", f"/memories/{note.json()['id']}")
    assert one.status_code == 200 and one.json()["notes"][0]["text"] == "The standup moved to 9:30."

    first = api(
        gateway, ada, "POST", "/facts", json={"subject": "Fjord", "predicate": "db", "object": "MySQL"}
    )
    second = api(
        gateway, ada, "POST", "/facts", json={"subject": "Fjord", "predicate": "db", "object": "Postgres"}
    )
    assert (first.json()["action"], second.json()["action"]) == ("store", "supersede")
    history = api(gateway, ada, "GET", "/memories", params={"subject": "fjord", "include_history": "true"})
    assert sorted((f["object"], f["current"]) for f in history.json()["facts"]) == [
        ("MySQL", False),
        ("Postgres", True),
    ]
    context = api(gateway, ada, "POST", "/context", json={"query": "what database does Fjord use"})
    assert context.status_code == 200 and context.json()["facts"][0]["text"].endswith("Postgres")
    status = api(gateway, ada, "GET", "/status")
    assert status.status_code == 200

    async def via_mcp() -> dict[str, Any]:
        async with connect(gateway, ada) as client:
            return data(await client.call_tool("retrieve_memory", {"id": note.json()["id"]}))

    assert anyio.run(via_mcp)["notes"][0]["text"] == "The standup moved to 9:30."


@pytest.mark.req("recall:get-context", "recall:budget-order")
def test_get_context_over_rest_fits_its_budget_or_names_the_limit(gateway: Gateway, ada: str) -> None:
    for i in range(8):
        statement = f"Kiln firing log {i}: cone 6 glaze, {'ü' * 40} " + "slow cooling overnight " * 12
        assert api(gateway, ada, "POST", "/memories", json={"statement": statement}).status_code == 200
    for budget in (100, 137, 800):
        reply = api(
            gateway, ada, "POST", "/context", json={"query": "kiln firing glaze", "max_tokens": budget}
        )
        assert reply.status_code == 200, reply.text
        compact = json.dumps(reply.json(), ensure_ascii=False, separators=(",", ":"))
        assert estimate_tokens(compact) <= reply.json()["tokens"] <= budget
        assert reply.json()["notes"]  # the newest relevant note, cut if it must be
    for budget, limit in ((99, "below the minimum, 100"), (4001, "above the maximum, 4000")):
        status, code, message = error(
            api(gateway, ada, "POST", "/context", json={"query": "kiln", "max_tokens": budget})
        )
        assert (status, code) == (400, "invalid_argument") and limit in message


def test_retire_and_restore(gateway: Gateway, ada: str) -> None:
    made = api(gateway, ada, "POST", "/memories", json={"statement": "Temporary rule: no deploys."}).json()
    retired = api(gateway, ada, "POST", f"/memories/{made['id']}/retire", json={"reason": "wrong"})
    assert retired.status_code == 200 and retired.json()["action"] == "retire"
    restored = api(gateway, ada, "POST", f"/memories/{made['id']}/restore")
    assert restored.status_code == 200 and restored.json()["action"] == "restore"


def test_refusals_carry_the_tools_codes_and_write_nothing(gateway: Gateway, ada: str) -> None:
    ws = gateway.workspace_dir(ADA)
    status, code, message = error(api(gateway, ada, "POST", "/memories", json={"statement": "x" * 4_001}))
    assert (status, code) == (400, "too_long") and "4,000" in message.replace("4000", "4,000")
    status, code, _ = error(api(gateway, ada, "POST", "/memories", json={"statement": "a", "subject": "b"}))
    assert (status, code) == (400, "invalid_input")
    status, code, message = error(api(gateway, ada, "POST", "/memories", json={"statment": "typo"}))
    assert (status, code) == (400, "invalid_input") and "statement" in message
    status, code, _ = error(api(gateway, ada, "GET", "/memories/nte_01ZZZZZZZZZZZZZZZZZZZZZZZZ"))
    assert (status, code) == (404, "not_found")
    status, code, _ = error(api(gateway, ada, "POST", "/memories", content=b"x" * 5_000_000))
    assert (status, code) == (413, "payload_too_large")
    assert files_containing(ws, "typo") == []


def test_auth_is_exactly_that_of_mcp(gateway: Gateway, ada: str) -> None:
    missing = api(gateway, None, "GET", "/status")
    assert missing.status_code == 401 and "Bearer" in missing.headers["www-authenticate"]
    status, code, _ = error(api(gateway, "alm_not_a_real_token", "GET", "/status"))
    assert (status, code) == (401, "invalid_token")

    reader = gateway.token(ADA, "Reader", "--read-only")
    status, code, _ = error(api(gateway, reader, "POST", "/memories", json={"statement": "sneaky"}))
    assert (status, code) == (403, "read_only")
    assert files_containing(gateway.workspace_dir(ADA), "sneaky") == []

    pinned = gateway.token(ADA, "Pinned", "--scope", "project:fjord")
    status, code, _ = error(
        api(gateway, pinned, "POST", "/memories", json={"statement": "x", "scope": "project:other"})
    )
    assert status == 403 and code == "forbidden"
    kept = api(gateway, pinned, "POST", "/memories", json={"statement": "Fjord ships on Fridays."}).json()
    assert kept["scope"] == "project:fjord"


@pytest.mark.req("gw:isolation")
def test_one_owners_token_cannot_reach_anothers_memory(gateway: Gateway, ada: str) -> None:
    secret = api(gateway, ada, "POST", "/memories", json={"statement": "Ada's private plan."}).json()
    bob = gateway.token(BOB, "Bob's script")
    status, code, _ = error(api(gateway, bob, "GET", f"/memories/{secret['id']}"))
    assert (status, code) == (404, "not_found")
    assert api(gateway, bob, "POST", f"/memories/{secret['id']}/retire").status_code == 404
    found = api(gateway, bob, "POST", "/context", json={"query": "private plan"}).json()
    assert "Ada's private plan." not in str(found)


def test_the_openapi_document_is_served_without_a_token(gateway: Gateway) -> None:
    doc = httpx.get(gateway.url + "/api/v1/openapi.json", timeout=30)
    assert doc.status_code == 200 and doc.json()["openapi"].startswith("3.1")
