"""Owners, workspaces and personal access tokens in the control plane (gw:pat)."""

from __future__ import annotations

import pytest

from gateway.auth.passwords import hash_password, verify_password
from gateway.auth.tokens import parse_bearer
from gateway.control import tokens
from gateway.control.store import ControlPlane
from gateway.errors import (
    AlreadyExists,
    InvalidEmail,
    InvalidName,
    InvalidScope,
    OwnerNotFound,
    TokenNotFound,
    WorkspaceNotFound,
)


@pytest.mark.req("gw:pat")
def test_a_token_is_shown_once_and_stored_only_as_its_hash(store: ControlPlane) -> None:
    owner, ws = store.owners.create("ada@example.com", None)
    connection, secret = store.connections.create_pat(owner.id, ws.id, "laptop")
    assert tokens.looks_like_token(secret)
    db = store._db
    dump = "\n".join(str(row) for row in db.execute("SELECT * FROM tokens"))
    dump += "\n".join(str(row) for row in db.execute("SELECT * FROM audit_events"))
    assert secret not in dump
    assert tokens.hash_token(secret) in dump
    assert connection.token_prefix is not None and secret.startswith(connection.token_prefix)
    principal = store.connections.authenticate(secret)
    assert principal is not None
    assert (principal.workspace_id, principal.connection_name, principal.read_only, principal.scope) == (
        ws.id,
        "laptop",
        False,
        None,
    )


@pytest.mark.req("gw:pat")
def test_read_only_and_pinned_scope_travel_with_the_token(store: ControlPlane) -> None:
    owner, ws = store.owners.create("ada@example.com", None)
    _, secret = store.connections.create_pat(owner.id, ws.id, "reader", read_only=True, scope="project:fjord")
    principal = store.connections.authenticate(secret)
    assert principal is not None and principal.read_only and principal.scope == "project:fjord"


@pytest.mark.req("gw:pat")
@pytest.mark.parametrize("label", ["", "Project", "-x", "a..b", "a b", "x" * 65, "../etc", "é"])
def test_bad_scope_labels_are_refused(store: ControlPlane, label: str) -> None:
    owner, ws = store.owners.create("ada@example.com", None)
    with pytest.raises(InvalidScope):
        store.connections.create_pat(owner.id, ws.id, "t", scope=label)
    assert store.connections.of_owner(owner.id) == []


@pytest.mark.req("gw:pat")
def test_revoked_tokens_stop_working_at_once_and_are_audited(store: ControlPlane) -> None:
    owner, ws = store.owners.create("ada@example.com", None)
    connection, secret = store.connections.create_pat(owner.id, ws.id, "laptop")
    revoked = store.connections.revoke(owner.id, "laptop", remote="127.0.0.1")
    assert revoked.revoked_at is not None
    assert store.connections.authenticate(secret) is None
    assert store.connections.of_owner(owner.id) == []
    assert [c.id for c in store.connections.of_owner(owner.id, include_revoked=True)] == [connection.id]
    kinds = [e.kind for e in store.audit_log.events(owner_id=owner.id)]
    assert kinds == ["token.revoke", "token.create", "owner.create"]
    with pytest.raises(TokenNotFound):
        store.connections.revoke(owner.id, "laptop")
    # the name is free again once revoked
    store.connections.create_pat(owner.id, ws.id, "laptop")


@pytest.mark.req("gw:pat")
def test_names_are_unique_among_live_tokens_and_owners_by_email(store: ControlPlane) -> None:
    owner, ws = store.owners.create("ada@example.com", None)
    store.connections.create_pat(owner.id, ws.id, "laptop")
    with pytest.raises(AlreadyExists):
        store.connections.create_pat(owner.id, ws.id, "laptop")
    with pytest.raises(AlreadyExists):
        store.owners.create("ADA@example.com", None)
    with pytest.raises(InvalidEmail):
        store.owners.create("not-an-email", None)
    with pytest.raises(InvalidName):
        store.connections.create_pat(owner.id, ws.id, "  ")
    with pytest.raises(OwnerNotFound):
        store.owners.by_email("bob@example.com")


@pytest.mark.req("gw:pat")
def test_unknown_and_malformed_tokens_are_refused(store: ControlPlane) -> None:
    assert store.connections.authenticate("") is None
    assert store.connections.authenticate("alm_pat_" + "A" * 43) is None
    assert store.connections.authenticate("x' OR 1=1 --") is None


@pytest.mark.req("gw:pat")
def test_workspaces(store: ControlPlane) -> None:
    owner, default = store.owners.create("ada@example.com", None)
    other = store.owners.create_workspace(owner.id, "research")
    assert [w.name for w in store.owners.workspaces(owner.id)] == ["default", "research"]
    assert store.owners.workspace_by_name(owner.id, "research") == other
    with pytest.raises(WorkspaceNotFound):
        store.owners.workspace_by_name(owner.id, "nope")
    with pytest.raises(AlreadyExists):
        store.owners.create_workspace(owner.id, "research")
    assert default.id != other.id


def test_owner_passwords_are_argon2id(store: ControlPlane) -> None:
    owner, _ = store.owners.create("ada@example.com", hash_password("correct horse"))
    stored = store.owners.password_hash(owner.id)
    assert stored is not None and stored.startswith("$argon2id$")
    assert verify_password(stored, "correct horse")
    assert not verify_password(stored, "wrong")
    assert not verify_password("garbage", "x")


def test_bearer_parsing() -> None:
    assert parse_bearer("Bearer abc") == "abc"
    assert parse_bearer("bearer  abc ") == "abc"
    assert parse_bearer("Basic abc") is None
    assert parse_bearer("Bearer ") is None
    assert parse_bearer(None) is None
