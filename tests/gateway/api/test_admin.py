"""The admin surface over REST (``/api/v1/admin/…``, gw:rest; life:delete): a real gateway, real
engines, bearer tokens with the same read-only and scope rules as ``/mcp``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gateway.api.admin import ADMIN_OPERATIONS, query_of
from tests.gateway.api.test_rest import ADA, api, error, gateway_of_ada_and_bob
from tests.gateway.e2e import Gateway, files_containing

pytestmark = pytest.mark.req("gw:rest")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from gateway_of_ada_and_bob(tmp_path_factory.mktemp("rest-admin"), "10000")


def test_query_parameters_are_the_operations_own() -> None:
    listing = next(op for op in ADMIN_OPERATIONS if op.operation_id == "list_memories")
    assert query_of(listing, [("state", "retired"), ("q", "x")]) == {"state": "retired", "q": "x"}
    with pytest.raises(ValueError, match="unknown query parameter 'sate'"):
        query_of(listing, [("sate", "retired")])
    with pytest.raises(ValueError, match="given twice"):
        query_of(listing, [("q", "a"), ("q", "b")])


def test_list_and_filter_every_state(gateway: Gateway) -> None:
    token = gateway.token(ADA, "Admin script")
    kept = api(gateway, token, "POST", "/memories", json={"statement": "Backups run at 02:00."}).json()
    gone = api(gateway, token, "POST", "/memories", json={"statement": "Old rule: no Friday deploys."}).json()
    api(gateway, token, "POST", f"/memories/{gone['id']}/retire", json={"reason": "changed"})
    listing = api(gateway, token, "GET", "/admin/memories", params={"state": "retired"})
    assert listing.status_code == 200 and [i["id"] for i in listing.json()["items"]] == [gone["id"]]
    found = api(gateway, token, "GET", "/admin/memories", params={"q": "backups"}).json()
    assert [i["id"] for i in found["items"]] == [kept["id"]] and found["items"][0]["source"] == "Admin script"
    one = api(gateway, token, "GET", f"/admin/memories/{kept['id']}")
    assert one.status_code == 200 and one.json()["item"]["state"] == "live"
    assert "retired" not in one.json()["item"]
    why = api(gateway, token, "GET", f"/admin/memories/{gone['id']}").json()["item"]["retired"]
    assert (why["reason"], why["by"]) == ("changed", "Admin script") and why["at"].endswith("Z")
    assert error(api(gateway, token, "GET", "/admin/memories", params={"kind": "fcat"}))[:2] == (
        400,
        "invalid_input",
    )
    assert error(api(gateway, token, "GET", "/admin/memories", params={"colour": "red"}))[:2] == (
        400,
        "invalid_input",
    )


@pytest.mark.req("life:delete")
def test_no_token_can_delete_over_rest_agents_cannot_delete(gateway: Gateway) -> None:
    token = gateway.token(ADA, "Cleanup script")
    reader = gateway.token(ADA, "Reader", "--read-only")
    pinned = gateway.token(ADA, "Pinned", "--scope", "project:kelp")
    secret = "The intern's phone is 555-0199-Walrus."
    made = api(
        gateway, token, "POST", "/memories", json={"statement": secret, "scope": "project:kelp"}
    ).json()
    path = f"/admin/memories/{made['id']}"
    api(gateway, token, "POST", f"/memories/{made['id']}/retire", json={"reason": "wrong"})

    status, code, message = error(api(gateway, token, "DELETE", path))
    assert (status, code) == (403, "forbidden") and "dashboard" in message and "owner" in message
    assert error(api(gateway, pinned, "DELETE", path))[:2] == (403, "forbidden")
    assert error(api(gateway, reader, "DELETE", path))[:2] == (403, "read_only")
    assert api(gateway, reader, "GET", path).json()["item"]["state"] == "retired"  # it may read
    # nothing changed: the memory is still retired, its words still in the store, no audit event
    assert api(gateway, token, "GET", path).json()["item"]["state"] == "retired"
    assert files_containing(gateway.workspace_dir(ADA), "Walrus")
    events = [json.loads(line) for line in gateway.cli("audit", "--owner", ADA).splitlines()]
    assert not [e for e in events if e["kind"] == "memory.delete"]
