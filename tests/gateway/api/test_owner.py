"""Settings, activity and connections over REST (``/api/v1/admin/…``, gw:rest): a real gateway, real
engines, bearer tokens with the same read-only and scope rules as ``/mcp``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gateway.api.test_rest import ADA, BOB, api, error
from tests.gateway.e2e import Gateway, start_gateway

pytestmark = pytest.mark.req("gw:rest")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("rest-owner")
    gw = start_gateway(
        tmp / "data",
        tmp / "gateway.log",
        rate_limit_burst="10000",
        rate_limit_per_second="10000",
        engine_start_timeout="60",
    )
    try:
        gw.owner(ADA)
        gw.owner(BOB)
        yield gw
    finally:
        gw.stop()


def _field(reply: dict[str, object], name: str) -> dict[str, object]:
    fields = reply["fields"]
    assert isinstance(fields, list)
    return next(f for f in fields if f["name"] == name)


@pytest.mark.req("settings:layers", "settings:strict")
def test_settings_read_refused_changed_and_cleared(gateway: Gateway) -> None:
    token = gateway.token(ADA, "Settings script")
    reader = gateway.token(ADA, "Settings reader", "--read-only")
    pinned = gateway.token(ADA, "Settings pinned", "--scope", "project:fjord")
    found = api(gateway, reader, "GET", "/admin/settings")
    assert found.status_code == 200 and _field(found.json(), "notes_limit")["origin"] == "default"

    refused = api(
        gateway, token, "PATCH", "/admin/settings", json={"set": {"notes_limit": 0, "facts_limit": "4"}}
    )
    assert error(refused)[:2] == (400, "invalid_input")
    assert refused.json()["error"]["fields"] == {"notes_limit": "notes_limit 0 is out of range: use 1 to 50"}
    assert not (gateway.workspace_dir(ADA) / "settings.json").exists()
    assert error(api(gateway, token, "PATCH", "/admin/settings", content=b"[1]"))[:2] == (
        400,
        "invalid_input",
    )
    for who, code in ((reader, "read_only"), (pinned, "forbidden")):
        assert error(api(gateway, who, "PATCH", "/admin/settings", json={"set": {"notes_limit": 3}}))[:2] == (
            403,
            code,
        )

    changed = api(gateway, token, "PATCH", "/admin/settings", json={"set": {"notes_limit": "3"}})
    assert changed.status_code == 200, changed.text
    reply = changed.json()
    limit = _field(reply, "notes_limit")
    assert reply["restart_needed"] is False  # the engine was restarted and runs with it
    assert (limit["value"], limit["origin"], limit["override"]) == (3, "workspace", True)
    status = api(gateway, token, "GET", "/status").json()
    assert status["settings"]["notes_limit"] == 3 and status["settings_origin"]["notes_limit"] == "workspace"

    cleared = api(gateway, token, "PATCH", "/admin/settings", json={"clear": ["notes_limit"]}).json()
    assert _field(cleared, "notes_limit")["origin"] == "default"
    assert api(gateway, token, "GET", "/status").json()["settings"]["notes_limit"] == 20


@pytest.mark.req("sec:authz")
def test_a_tenant_token_cannot_choose_where_memories_are_sent(gateway: Gateway) -> None:
    token = gateway.token(BOB, "Endpoint script")
    hostile = {"embedding_provider": "vertex", "vertex_base_url": "http://127.0.0.1:9/v1", "notes_limit": 4}
    refused = api(gateway, token, "PATCH", "/admin/settings", json={"set": hostile})
    assert error(refused)[:2] == (400, "invalid_input")
    fields = refused.json()["error"]["fields"]
    assert set(fields) == {"embedding_provider", "vertex_base_url"}
    assert "is the operator's to set" in fields["vertex_base_url"]
    assert "'vertex' is not offered on this host" in fields["embedding_provider"]
    assert not (gateway.workspace_dir(BOB) / "settings.json").exists()  # nothing saved, not even notes_limit
    for name in ("vertex_project", "vertex_location", "vertex_offered"):
        one = api(gateway, token, "PATCH", "/admin/settings", json={"set": {name: "true"}})
        assert error(one)[:2] == (400, "invalid_input") and set(one.json()["error"]["fields"]) == {name}
    reply = api(gateway, token, "GET", "/admin/settings").json()
    assert _field(reply, "embedding_provider")["choices"] == ["local", "off"]
    assert _field(reply, "vertex_base_url")["instance_only"] is True
    assert _field(reply, "notes_limit")["instance_only"] is False


@pytest.mark.req("life:retrieval-log")
def test_activity_names_the_connection_and_follows_the_pinned_scope(gateway: Gateway) -> None:
    token = gateway.token(BOB, "Bob's agent")
    pinned = gateway.token(BOB, "Bob's pinned", "--scope", "project:a")
    api(gateway, token, "POST", "/memories", json={"statement": "The kiln fires on Tuesdays."})
    assert api(gateway, token, "POST", "/context", json={"query": "kiln"}).status_code == 200
    assert api(gateway, pinned, "POST", "/context", json={"query": "kiln"}).status_code == 200
    everything = api(gateway, token, "GET", "/admin/activity").json()["entries"]
    assert [e["connection"] for e in everything] == ["Bob's pinned", "Bob's agent"]
    assert all(e["source"] is None and e["connection_id"].startswith("con_") for e in everything)
    assert "kiln" not in str(everything)
    mine = api(gateway, pinned, "GET", "/admin/activity").json()["entries"]
    assert [e["connection"] for e in mine] == ["Bob's pinned"]
    connections = api(gateway, token, "GET", "/admin/connections").json()["connections"]
    (agent,) = [c["id"] for c in connections if c["name"] == "Bob's agent"]
    by_id = api(gateway, token, "GET", "/admin/activity", params={"connection": agent, "limit": "1"})
    shown = [(e["connection_id"], e["connection"]) for e in by_id.json()["entries"]]
    assert shown == [(agent, "Bob's agent")]
    (pinned_id,) = [c["id"] for c in connections if c["name"] == "Bob's pinned"]
    assert api(gateway, token, "DELETE", f"/admin/connections/{pinned_id}").status_code == 200
    after = api(gateway, token, "GET", "/admin/activity").json()["entries"]
    assert [e["connection"] for e in after] == ["Bob's pinned", "Bob's agent"]  # revoked, still named
    assert error(api(gateway, token, "GET", "/admin/activity", params={"limit": "0"}))[:2] == (
        400,
        "invalid_input",
    )
    assert error(api(gateway, token, "GET", "/admin/activity", params={"colour": "x"}))[:2] == (
        400,
        "invalid_input",
    )


def test_connections_listed_and_revoked_only_by_a_full_connection(gateway: Gateway) -> None:
    token = gateway.token(ADA, "Connections script")
    reader = gateway.token(ADA, "Connections reader", "--read-only")
    victim = gateway.token(ADA, "To be revoked")
    listed = api(gateway, reader, "GET", "/admin/connections").json()["connections"]
    by_name = {c["name"]: c for c in listed}
    assert by_name["Connections reader"]["read_only"] is True and by_name["To be revoked"]["kind"] == "pat"
    assert victim not in str(listed) and token not in str(listed)
    target = by_name["To be revoked"]["id"]
    assert error(api(gateway, reader, "DELETE", f"/admin/connections/{target}"))[:2] == (403, "read_only")
    bobs = gateway.token(BOB, "Bob's other")
    bob_listed = api(gateway, bobs, "GET", "/admin/connections").json()["connections"]
    assert "To be revoked" not in str(bob_listed)
    assert error(api(gateway, bobs, "DELETE", f"/admin/connections/{target}"))[:2] == (404, "token_not_found")
    revoked = api(gateway, token, "DELETE", f"/admin/connections/{target}")
    assert revoked.status_code == 200 and revoked.json()["connection"]["revoked_at"]
    assert api(gateway, victim, "GET", "/status").status_code == 401
    assert error(api(gateway, token, "DELETE", f"/admin/connections/{target}"))[:2] == (
        404,
        "token_not_found",
    )
