"""The control plane's half of erasing an account: lock out, then forget (``life:delete``)."""

from __future__ import annotations

import pytest

from gateway.cluster.placement import place
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, MoveUnderWay, OwnerNotFound


@pytest.mark.req("life:delete")
def test_lock_out_then_forget_an_owner(store: ControlPlane) -> None:
    owner, default = store.owners.create("zed@example.com", None)
    other, _ = store.owners.create("other@example.com", None)
    _, secret = store.connections.create_pat(owner.id, default.id, "Laptop")
    _, kept = store.connections.create_pat(other.id, store.owners.workspaces(other.id)[0].id, "Laptop")
    store.accounts.create_session(
        owner.id, max_age=600, remote="10.0.0.9", user_agent=None, method="password"
    )
    failed = ("account:zed@example.com", "account:zed@example.com|address:10.0.0.8", "address:10.0.0.8")
    store.accounts.record_login_failure(failed, owner_id=owner.id, remote="10.0.0.8", detail={})
    store.accounts.record_login_failure(
        ("account:zed_@example.com|address:1",), owner_id=None, remote="1", detail={}
    )
    store.nodes.register("node-a", "http://node-a", now=1e9)  # its workspace placed on a node
    place(store.nodes, default.id, now=1e9, heartbeat_timeout=15, lease=30)
    with pytest.raises(OwnerNotFound):
        store.erasure.forget_owner(owner.id)  # not locked out yet: nothing is deleted
    assert store.connections.authenticate(secret) is not None

    workspaces = store.erasure.lock_out_owner(owner.id, remote="10.0.0.9")
    assert [w.id for w in workspaces] == [default.id]
    assert store.connections.authenticate(secret) is None
    with pytest.raises(OwnerNotFound):
        store.owners.by_email("zed@example.com")
    assert store.connections.of_owner(owner.id) == []

    gone = store.erasure.forget_owner(owner.id)
    assert gone["workspaces"] == 1 and gone["connections"] == 1 and gone["tokens"] == 1
    assert gone["placements"] == 1 and store.nodes.placement(default.id) is None
    assert gone["sessions"] == 1
    assert store.owners.workspaces(owner.id) == []
    events = store.audit_log.events(owner_id=owner.id)
    assert events[0].kind == "account.erase" and events[0].detail == gone
    assert all(e.remote is None for e in events)
    assert "zed@example.com" not in repr([e.detail for e in events])
    left = {str(r[0]) for r in store._db.execute("SELECT key FROM login_failures").fetchall()}
    assert left == {"address:10.0.0.8", "account:zed_@example.com|address:1"}  # the email is gone
    # nobody else is touched
    assert store.connections.authenticate(kept) is not None
    assert store.owners.by_email("other@example.com").id == other.id
    with pytest.raises(OwnerNotFound):
        store.erasure.lock_out_owner(owner.id, remote=None)


@pytest.mark.req("life:delete")
@pytest.mark.req("run:scale-out")
def test_an_erase_and_a_move_of_the_same_owner_never_run_together(store: ControlPlane) -> None:
    """A move under way refuses the erase (nothing changes); a locked-out owner's workspace is not
    moved; while locked out, the workspace reads as being erased (a node may erase its copy)."""
    for name in ("node-a", "node-b"):
        store.nodes.register(name, f"http://{name}", now=1e9)
    owner, workspace = store.owners.create("mover@example.com", None)
    _, secret = store.connections.create_pat(owner.id, workspace.id, "Laptop")
    store.nodes.place_on(workspace.id, "node-a", now=1e9, lease=30)
    move = store.moves.begin(workspace.id, "node-a", "node-b", now=1e9, timeout=10)
    with pytest.raises(MoveUnderWay, match=r"move of workspace \w+ to node 'node-b' is under way"):
        store.erasure.lock_out_owner(owner.id, remote=None)
    assert store.connections.authenticate(secret) is not None  # nothing was locked out
    assert not store.erasure.being_erased(workspace.id)
    assert store.owners.by_email("mover@example.com").id == owner.id
    assert store.moves.abort(move, now=1e9 + 1, reason="test")
    assert [w.id for w in store.erasure.lock_out_owner(owner.id, remote=None)] == [workspace.id]
    assert store.erasure.being_erased(workspace.id)
    with pytest.raises(BadRequest, match="being erased"):
        store.moves.begin(workspace.id, "node-a", "node-b", now=1e9 + 2, timeout=10)
    placement = store.nodes.placement(workspace.id)
    assert placement is not None and placement.moving_to is None
    assert [m.id for m in store.moves.of_workspace(workspace.id)] == [move.id]
    store.erasure.forget_owner(owner.id)
    assert store.moves.of_workspace(workspace.id) == [] and not store.erasure.being_erased(workspace.id)
