"""The control plane's OAuth tables: codes are single use, refresh tokens rotate and their reuse
revokes the family, access tokens expire, unused clients are forgotten (gw:oauth)."""

from __future__ import annotations

import pytest

from gateway.control import tokens
from gateway.control.clock import utcnow
from gateway.control.records import ConsentChoice, TokenLifetimes
from gateway.control.store import ControlPlane
from gateway.errors import InvalidGrant

NOW = 1_900_000_000.0
LIFETIMES = TokenLifetimes(access=600, refresh=86400)
RESOURCE = "https://mem.example.com/mcp"


def _grant(store: ControlPlane, name: str = "Claude", *, now: float = NOW) -> str:
    owner, workspace = store.owners.create(f"{name.lower()}-{tokens.new_id('x')}@example.com", None)
    store.oauth.save_client(
        "dcr_c", "dcr", {"redirect_uris": ["http://127.0.0.1/cb"]}, now=now, expires_at=None
    )
    return store.oauth.save_code(
        client_id="dcr_c",
        choice=ConsentChoice(owner.id, workspace.id, name, read_only=True, scope="project:fjord"),
        redirect_uri="http://127.0.0.1/cb",
        redirect_explicit=True,
        code_challenge="challenge",
        resource=RESOURCE,
        scopes=("memory",),
        now=now,
        ttl=60,
        remote="127.0.0.1",
    )


@pytest.mark.req("gw:oauth")
def test_a_code_becomes_a_named_connection_whose_tokens_authenticate(store: ControlPlane) -> None:
    issued = store.oauth.exchange_code(_grant(store), now=NOW, lifetimes=LIFETIMES)
    principal = store.connections.authenticate(issued.access_token, now=utcnow())
    assert principal is not None
    assert (principal.connection_name, principal.read_only, principal.scope) == (
        "Claude",
        True,
        "project:fjord",
    )
    assert principal.resource == RESOURCE
    connection = store.connections.connection(issued.connection_id)
    assert (connection.kind, connection.name) == ("oauth", "Claude")
    # only hashes are stored
    stored = {str(r[0]) for r in store._db.execute("SELECT token_hash FROM tokens")}
    assert issued.access_token not in stored and tokens.hash_token(issued.access_token) in stored
    kinds = [e.kind for e in store.audit_log.events()]
    assert "oauth.grant" in kinds and "oauth.token_issue" in kinds


@pytest.mark.req("gw:oauth")
def test_a_code_works_once_and_its_reuse_revokes_what_it_issued(store: ControlPlane) -> None:
    code = _grant(store)
    issued = store.oauth.exchange_code(code, now=NOW, lifetimes=LIFETIMES)
    with pytest.raises(InvalidGrant, match="already used"):
        store.oauth.exchange_code(code, now=NOW + 1, lifetimes=LIFETIMES)
    assert store.connections.authenticate(issued.access_token) is None
    assert store.connections.connection(issued.connection_id).revoked_at is not None


@pytest.mark.req("gw:oauth")
def test_refresh_rotates_and_reusing_an_old_one_revokes_the_family(store: ControlPlane) -> None:
    first = store.oauth.exchange_code(_grant(store), now=NOW, lifetimes=LIFETIMES)
    second = store.oauth.rotate_refresh(first.refresh_token, now=NOW + 10, lifetimes=LIFETIMES)
    assert second.refresh_token != first.refresh_token and second.connection_id == first.connection_id
    assert store.connections.authenticate(second.access_token) is not None
    with pytest.raises(InvalidGrant, match="already used"):
        store.oauth.rotate_refresh(first.refresh_token, now=NOW + 20, lifetimes=LIFETIMES)
    # the whole family is gone, including the newest pair
    assert store.connections.authenticate(second.access_token) is None
    with pytest.raises(InvalidGrant):
        store.oauth.rotate_refresh(second.refresh_token, now=NOW + 30, lifetimes=LIFETIMES)
    reuse = [e for e in store.audit_log.events() if e.kind == "oauth.refresh_reuse"]
    assert len(reuse) == 1 and reuse[0].connection_id == first.connection_id


@pytest.mark.req("gw:oauth")
def test_tokens_expire_by_the_clock_given(store: ControlPlane) -> None:
    from gateway.control.clock import iso

    issued = store.oauth.exchange_code(_grant(store), now=NOW, lifetimes=LIFETIMES)
    assert store.connections.authenticate(issued.access_token, now=iso(NOW + 599)) is not None
    assert store.connections.authenticate(issued.access_token, now=iso(NOW + 601)) is None
    assert store.oauth.access_token(issued.access_token, now=NOW + 601) is None
    with pytest.raises(InvalidGrant, match="expired"):
        store.oauth.rotate_refresh(issued.refresh_token, now=NOW + 86401, lifetimes=LIFETIMES)


@pytest.mark.req("gw:oauth")
def test_revoking_a_refresh_token_ends_the_connection_and_it_lists_with_pats(store: ControlPlane) -> None:
    issued = store.oauth.exchange_code(_grant(store), now=NOW, lifetimes=LIFETIMES)
    owner_id = store.connections.connection(issued.connection_id).owner_id
    workspace_id = store.connections.connection(issued.connection_id).workspace_id
    store.connections.create_pat(owner_id, workspace_id, "laptop")
    assert sorted((c.kind, c.name) for c in store.connections.of_owner(owner_id)) == [
        ("oauth", "Claude"),
        ("pat", "laptop"),
    ]
    store.oauth.revoke_token(issued.refresh_token, now=NOW + 5)
    assert store.connections.authenticate(issued.access_token) is None
    assert [c.name for c in store.connections.of_owner(owner_id)] == ["laptop"]
    # and the owner can revoke an OAuth connection by name, like a PAT
    again = store.oauth.exchange_code(_grant(store, "Cursor"), now=NOW, lifetimes=LIFETIMES)
    cursor_owner = store.connections.connection(again.connection_id).owner_id
    store.connections.revoke(cursor_owner, "Cursor")
    assert store.connections.authenticate(again.access_token) is None


@pytest.mark.req("gw:oauth")
def test_a_second_grant_with_a_live_name_gets_a_distinct_name(store: ControlPlane) -> None:
    owner, workspace = store.owners.create("dup@example.com", None)
    store.connections.create_pat(owner.id, workspace.id, "Claude")
    store.oauth.save_client(
        "dcr_c", "dcr", {"redirect_uris": ["http://127.0.0.1/cb"]}, now=NOW, expires_at=None
    )
    code = store.oauth.save_code(
        client_id="dcr_c",
        choice=ConsentChoice(owner.id, workspace.id, "Claude", read_only=False, scope=None),
        redirect_uri="http://127.0.0.1/cb",
        redirect_explicit=True,
        code_challenge="c",
        resource=RESOURCE,
        scopes=("memory",),
        now=NOW,
        ttl=60,
        remote=None,
    )
    issued = store.oauth.exchange_code(code, now=NOW, lifetimes=LIFETIMES)
    assert store.connections.connection(issued.connection_id).name == "Claude (2)"


@pytest.mark.req("gw:oauth")
def test_registered_clients_never_used_are_collected(store: ControlPlane) -> None:
    store.oauth.save_client(
        "dcr_unused", "dcr", {"redirect_uris": ["http://127.0.0.1/cb"]}, now=NOW, expires_at=None
    )
    _grant(store, now=NOW)  # dcr_c is used: a code was issued for it
    assert store.oauth.collect_garbage(now=NOW + 100, unused_client_age=3600) == 0
    assert store.oauth.collect_garbage(now=NOW + 3601, unused_client_age=3600) == 1
    assert store.oauth.client("dcr_unused") is None
    assert store.oauth.client("dcr_c") is not None


@pytest.mark.req("gw:oauth", "sec:authz")
def test_past_the_cap_the_oldest_unused_clients_are_collected(store: ControlPlane) -> None:
    for n in range(5):
        store.oauth.save_client(
            f"dcr_{n}", "dcr", {"redirect_uris": ["http://127.0.0.1/cb"]}, now=NOW + n, expires_at=None
        )
    _grant(store, now=NOW)  # dcr_c is used: never counted against the cap
    assert store.oauth.collect_garbage(now=NOW + 10, unused_client_age=3600, max_unused_clients=2) == 3
    assert [c for c in ("dcr_0", "dcr_1", "dcr_2", "dcr_3", "dcr_4") if store.oauth.client(c)] == [
        "dcr_3",
        "dcr_4",
    ]
    assert store.oauth.client("dcr_c") is not None
    assert store.oauth.collect_garbage(now=NOW + 10, unused_client_age=3600, max_unused_clients=2) == 0
