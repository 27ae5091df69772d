"""The control plane's password queries (``gw:signin``): setting a password, one-time reset links."""

from __future__ import annotations

import threading

import pytest

from gateway.auth.passwords import hash_password, verify_password
from gateway.control.store import ControlPlane
from gateway.errors import OwnerNotFound, ResetLinkInvalid


@pytest.mark.req("gw:signin")
def test_a_reset_link_works_once_until_it_expires_and_ends_the_owners_sessions(store: ControlPlane) -> None:
    owner, _ = store.owners.create("ada@example.com", None)
    _, cookie = store.accounts.create_session(
        owner.id, max_age=3600, remote=None, user_agent=None, method="password"
    )
    secret, expires = store.passwords.create_reset_link(owner.id, ttl=3600)
    other, _ = store.passwords.create_reset_link(owner.id, ttl=3600)
    link = store.passwords.reset_link(secret)
    assert link is not None and (link.owner_id, link.email, link.expires_at) == (
        owner.id,
        owner.email,
        expires,
    )
    assert store.passwords.reset_link(secret + "x") is None
    assert (
        store.passwords.use_reset_link(secret, hash_password("new password 1"), remote="10.0.0.9") == owner.id
    )
    stored = store.owners.password_hash(owner.id)
    assert stored is not None and verify_password(stored, "new password 1")
    assert store.accounts.session_by_secret(cookie) is None  # signed out everywhere
    for spent in (secret, other):  # used, and the owner's other link voided with it
        assert store.passwords.reset_link(spent) is None
        with pytest.raises(ResetLinkInvalid, match="used already, it expired"):
            store.passwords.use_reset_link(spent, hash_password("another password"), remote=None)
    expired, _ = store.passwords.create_reset_link(owner.id, ttl=-1)
    assert store.passwords.reset_link(expired) is None
    with pytest.raises(ResetLinkInvalid):
        store.passwords.use_reset_link(expired, hash_password("another password"), remote=None)
    stored = store.owners.password_hash(owner.id)
    assert stored is not None and verify_password(stored, "new password 1")  # refusals changed nothing
    kinds = [e.kind for e in store.audit_log.events(owner_id=owner.id)]
    assert kinds.count("password.reset_link") == 3 and kinds.count("password.reset") == 1
    assert kinds.count("password.reset_refused") == 3
    assert not any(secret in str(e.detail) for e in store.audit_log.events(owner_id=owner.id))


@pytest.mark.req("gw:signin")
def test_two_uses_of_one_link_at_once_set_one_password(store: ControlPlane) -> None:
    owner, _ = store.owners.create("bo@example.com", None)
    secret, _ = store.passwords.create_reset_link(owner.id, ttl=3600)
    outcomes: list[str] = []

    def use(password: str) -> None:
        try:
            store.passwords.use_reset_link(secret, hash_password(password), remote=None)
            outcomes.append("set")
        except ResetLinkInvalid:
            outcomes.append("refused")

    threads = [threading.Thread(target=use, args=(f"password number {i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["refused", "set"]


@pytest.mark.req("gw:signin")
def test_set_password_is_audited_and_refused_for_a_locked_out_owner(store: ControlPlane) -> None:
    owner, _ = store.owners.create("cy@example.com", None)
    store.passwords.set_password(owner.id, hash_password("a fine password"), via="cli")
    assert [e.detail for e in store.audit_log.events(owner_id=owner.id) if e.kind == "password.set"] == [
        {"via": "cli"}
    ]
    secret, _ = store.passwords.create_reset_link(owner.id, ttl=3600)
    store.erasure.lock_out_owner(owner.id, remote=None)
    assert store.passwords.reset_link(secret) is None
    with pytest.raises(OwnerNotFound):
        store.passwords.set_password(owner.id, hash_password("another password"), via="cli")
    with pytest.raises(ResetLinkInvalid):
        store.passwords.use_reset_link(secret, hash_password("another password"), remote=None)
    store.erasure.forget_owner(owner.id)  # erasing the account takes its reset links too
