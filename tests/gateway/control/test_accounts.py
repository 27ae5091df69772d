"""The control plane's account queries (``gw:signin``): sessions, login failures, invites, identities."""

from __future__ import annotations

import pytest

from gateway.control.store import ControlPlane
from gateway.errors import AlreadyExists, InviteInvalid, OwnerNotFound


@pytest.mark.req("gw:signin")
def test_a_session_is_found_by_its_secret_only_while_live(store: ControlPlane) -> None:
    owner, _ = store.owners.create("ada@example.com", None)
    session, secret = store.accounts.create_session(
        owner.id, max_age=3600, remote="10.0.0.1", user_agent="test", method="password"
    )
    assert store.accounts.session_by_secret(secret) == session
    assert session.email == "ada@example.com" and secret not in session.session_id
    assert store.accounts.session_by_secret(secret + "x") is None
    store.accounts.end_session(session, remote="10.0.0.1")
    assert store.accounts.session_by_secret(secret) is None
    _, expired = store.accounts.create_session(
        owner.id, max_age=-1, remote=None, user_agent=None, method="password"
    )
    assert store.accounts.session_by_secret(expired) is None
    kinds = [e.kind for e in store.audit_log.events(owner_id=owner.id)]
    assert kinds[:3] == ["signin.success", "signout", "signin.success"]


@pytest.mark.req("gw:signin")
def test_login_failures_count_inside_the_window_and_clear(store: ControlPlane) -> None:
    keys = ("account:bo@example.com", "address:10.0.0.2")
    for _ in range(3):
        store.accounts.record_login_failure(keys, owner_id=None, remote="10.0.0.2", detail={"reason": "test"})
    assert store.accounts.login_failures(keys[0], window=900) == 3
    assert store.accounts.login_failures(keys[1], window=900) == 3
    assert store.accounts.login_failures(keys[0], window=0) == 0  # older than the window: not counted
    store.accounts.clear_login_failures(keys[0])
    assert store.accounts.login_failures(keys[0], window=900) == 0
    assert store.accounts.login_failures(keys[1], window=900) == 3


@pytest.mark.req("gw:signin", "sec:authz")
def test_old_failures_are_forgotten_and_known_addresses_are_the_owners_sessions(store: ControlPlane) -> None:
    store.accounts.record_login_failure(("address:10.0.0.3",), owner_id=None, remote="10.0.0.3", detail={})
    store.accounts.forget_login_failures(older_than=900)
    assert store.accounts.login_failures("address:10.0.0.3", window=900) == 1  # inside the window: kept
    store.accounts.forget_login_failures(older_than=-1)
    rows = store._db.execute("SELECT count(*) FROM login_failures").fetchone()
    assert rows is not None and rows[0] == 0  # gone from the table, not just uncounted
    owner, _ = store.owners.create("di@example.com", None)
    store.accounts.create_session(
        owner.id, max_age=3600, remote="10.0.0.4", user_agent=None, method="password"
    )
    assert store.accounts.signed_in_from(owner.id, "10.0.0.4", within=86400)
    assert not store.accounts.signed_in_from(owner.id, "10.0.0.5", within=86400)
    assert not store.accounts.signed_in_from(owner.id, "10.0.0.4", within=-1)
    assert not store.accounts.signed_in_from(owner.id, None, within=86400)


@pytest.mark.req("gw:signin")
def test_an_invite_works_once_and_a_failed_sign_up_changes_nothing(store: ControlPlane) -> None:
    code = store.accounts.create_invite("for cy")
    with pytest.raises(InviteInvalid):
        store.accounts.sign_up("cy@example.com", None, invite="wrong", remote=None, method="password")
    store.owners.create("taken@example.com", None)
    with pytest.raises(AlreadyExists):
        store.accounts.sign_up("taken@example.com", None, invite=code, remote=None, method="password")
    owner = store.accounts.sign_up("cy@example.com", None, invite=code, remote=None, method="password")
    assert store.owners.by_email("cy@example.com") == owner
    with pytest.raises(InviteInvalid):
        store.accounts.sign_up("cz@example.com", None, invite=code, remote=None, method="password")
    with pytest.raises(OwnerNotFound):
        store.owners.by_email("cz@example.com")


@pytest.mark.req("gw:signin")
def test_identities_link_to_one_owner(store: ControlPlane) -> None:
    owner, _ = store.owners.create("di@example.com", None)
    with pytest.raises(OwnerNotFound):
        store.accounts.owner_by_identity("https://id.example", "sub-1")
    store.accounts.link_identity("https://id.example", "sub-1", owner.id, "di@example.com")
    store.accounts.link_identity("https://id.example", "sub-1", owner.id, "di@example.com")  # idempotent
    assert store.accounts.owner_by_identity("https://id.example", "sub-1") == owner
    with pytest.raises(OwnerNotFound):
        store.accounts.owner_by_identity("https://other.example", "sub-1")
