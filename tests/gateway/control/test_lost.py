"""A node lost for good (``run:scale-out``), in the control plane, on SQLite and
PostgreSQL: declaring it lost is refused for a node that heartbeated recently unless forced, is
idempotent and audited, calls off the moves from or to it, and makes it take nothing new and renew
no lease — whatever its heartbeat says, until it is explicitly found again."""

from __future__ import annotations

import pytest

from gateway.cluster.copies import placed_on_lost_nodes
from gateway.cluster.placement import place
from gateway.control.nodes import PlacementError
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, MoveCalledOff

NOW = 1_900_000_000.0
TIMEOUT, LEASE = 15.0, 30.0


def _placed(store: ControlPlane, who: str, node: str) -> str:
    workspace = store.owners.create(f"{who}@example.com", None)[1].id
    store.nodes.place_on(workspace, node, now=NOW, lease=LEASE)
    return workspace


def _nodes(store: ControlPlane) -> None:
    for name in ("node-a", "node-b", "node-c"):
        store.nodes.register(name, f"http://{name}:8080", now=NOW)


@pytest.mark.req("run:scale-out")
def test_a_node_that_heartbeated_recently_is_declared_lost_only_when_forced(store: ControlPlane) -> None:
    _nodes(store)
    workspace = _placed(store, "ada", "node-c")
    with pytest.raises(BadRequest, match=r"heartbeated 5 s ago: it is running.*--force.*nothing changed"):
        store.lost.mark("node-c", now=NOW + 5, heartbeat_timeout=TIMEOUT, force=False)
    with pytest.raises(BadRequest, match="no node named 'node-z'"):
        store.lost.mark("node-z", now=NOW + 5, heartbeat_timeout=TIMEOUT, force=True)
    assert not any(n.lost for n in store.nodes.all())
    assert not [e for e in store.audit_log.events(limit=10) if e.kind == "node.lost"]
    forced = store.lost.mark("node-c", now=NOW + 5, heartbeat_timeout=TIMEOUT, force=True)
    assert (forced.name, forced.workspaces, forced.already) == ("node-c", 1, False)
    assert [n.name for n in store.nodes.all() if n.lost] == ["node-c"]
    assert store.nodes.placement(workspace).node == "node-c"  # type: ignore[union-attr]  # kept: it is lost
    (event,) = [e for e in store.audit_log.events(limit=10) if e.kind == "node.lost"]
    assert event.detail == {"node": "node-c", "workspaces": 1, "moves_called_off": 0, "forced": True}
    again = store.lost.mark("node-c", now=NOW + 6, heartbeat_timeout=TIMEOUT, force=False)
    assert again.already  # idempotent: nothing changes, no second event
    assert len([e for e in store.audit_log.events(limit=10) if e.kind == "node.lost"]) == 1


@pytest.mark.req("run:scale-out")
def test_a_lost_node_takes_nothing_new_renews_no_lease_and_stays_lost_across_restarts(
    store: ControlPlane,
) -> None:
    _nodes(store)
    on_c = _placed(store, "bob", "node-c")
    # silent for longer than the timeout: no --force needed
    store.lost.mark("node-c", now=NOW + TIMEOUT + 1, heartbeat_timeout=TIMEOUT, force=False)
    # it comes back with a heartbeat and a restart: still lost, its beat renews no lease
    store.nodes.register("node-c", "http://node-c:8080", now=NOW + 20)
    assert store.nodes.heartbeat("node-c", now=NOW + 20, lease=LEASE) == 0
    assert store.nodes.placement(on_c).lease_expires_at == NOW + LEASE  # type: ignore[union-attr]
    (c,) = [n for n in store.nodes.all() if n.name == "node-c"]
    assert c.lost and c.heartbeat_at == NOW + 20  # its beat is recorded (node list shows it runs)
    # nothing new is placed on it, though it holds the fewest workspaces and heartbeats
    for who, node in (("ann", "node-a"), ("amy", "node-a"), ("ben", "node-b"), ("bea", "node-b")):
        _placed(store, who, node)
        store.nodes.heartbeat(node, now=NOW + 20, lease=LEASE)
    fresh = store.owners.create("cy@example.com", None)[1].id
    assert place(store.nodes, fresh, now=NOW + 20, heartbeat_timeout=TIMEOUT, lease=LEASE).node == "node-a"
    other = store.owners.create("dee@example.com", None)[1].id
    with pytest.raises(PlacementError, match="declared lost"):
        store.nodes.place_on(other, "node-c", now=NOW + 20, lease=LEASE)
    assert store.nodes.placement(other) is None
    # found again (its disk came back): it renews its leases and serves what is still placed on it
    assert store.lost.found("node-c") == 1
    assert not any(n.lost for n in store.nodes.all())
    assert store.nodes.heartbeat("node-c", now=NOW + 21, lease=LEASE) == 1  # bob's
    kinds = [e.kind for e in store.audit_log.events(limit=20) if e.kind.startswith("node.")]
    assert kinds == ["node.found", "node.lost"]
    with pytest.raises(BadRequest, match="not declared lost"):
        store.lost.found("node-c")


@pytest.mark.req("run:scale-out")
def test_declaring_a_node_lost_calls_off_the_moves_from_and_to_it(store: ControlPlane) -> None:
    _nodes(store)
    away = _placed(store, "eve", "node-c")
    toward = _placed(store, "fay", "node-a")
    untouched = _placed(store, "gus", "node-a")
    from_c = store.moves.begin(away, "node-c", "node-a", now=NOW, timeout=TIMEOUT)
    to_c = store.moves.begin(toward, "node-a", "node-c", now=NOW, timeout=TIMEOUT)
    between = store.moves.begin(untouched, "node-a", "node-b", now=NOW, timeout=TIMEOUT)
    lost = store.lost.mark("node-c", now=NOW + 1, heartbeat_timeout=TIMEOUT, force=True)
    assert sorted(m.id for m in lost.called_off) == sorted([from_c.id, to_c.id])
    for workspace, node in ((away, "node-c"), (toward, "node-a")):
        placement = store.nodes.placement(workspace)
        assert placement is not None and (placement.node, placement.moving_to) == (node, None)
    for move in (from_c, to_c):
        record = store.moves.by_id(move.id)
        assert record is not None and record.state == "called_off"
        assert record.note == "node node-c was declared lost"
    assert store.moves.by_id(between.id).state == "draining"  # type: ignore[union-attr]
    assert store.nodes.placement(untouched).moving_to == "node-b"  # type: ignore[union-attr]


@pytest.mark.req("run:scale-out")
@pytest.mark.req("life:delete")
def test_an_erase_does_not_wait_for_a_lost_node_and_remembers_its_copy_for_its_return(
    store: ControlPlane,
) -> None:
    _nodes(store)
    workspace = _placed(store, "hal", "node-c")
    elsewhere = _placed(store, "ivy", "node-a")
    owner = store.owners.by_email("hal@example.com").id
    store.lost.mark("node-c", now=NOW + 1, heartbeat_timeout=TIMEOUT, force=True)
    store.erasure.lock_out_owner(owner, remote=None)
    assert placed_on_lost_nodes(store, owner, [workspace]) == {workspace}
    assert placed_on_lost_nodes(store, owner, [elsewhere]) == set()  # node-a is not lost
    (event,) = [e for e in store.audit_log.events(limit=10) if e.kind == "account.erase.lost_copy"]
    assert event.workspace_id == workspace and event.detail["node"] == "node-c"
    assert "nothing left to erase there" in str(event.detail["note"])
    assert store.lost.copies_to_erase("node-c") == []  # the erase has not finished: its rows stay
    store.erasure.forget_owner(owner)
    assert store.lost.copies_to_erase("node-c") == [workspace]  # for node-c, should it come back
    assert store.lost.copies_to_erase("node-a") == []
    store.lost.forget_copy("node-c", workspace)
    assert store.lost.copies_to_erase("node-c") == []


@pytest.mark.req("run:scale-out")
def test_a_restore_whose_command_stopped_is_called_off_after_its_deadline_and_the_workspace_is_lost_again(
    store: ControlPlane,
) -> None:
    _nodes(store)
    restoring = _placed(store, "jo", "node-c")
    moving = _placed(store, "kim", "node-a")
    store.lost.mark("node-c", now=NOW + TIMEOUT + 1, heartbeat_timeout=TIMEOUT, force=False)
    restore = store.moves.begin(restoring, "node-c", "node-a", now=NOW + 20, timeout=TIMEOUT)
    move = store.moves.begin(moving, "node-a", "node-b", now=NOW + 20, timeout=TIMEOUT)
    assert (
        store.moves.call_off_lapsed_restores(now=NOW + 20 + TIMEOUT - 1) == []
    )  # its command may be at work
    store.moves.advance(restore.id, now=NOW + 30, timeout=TIMEOUT)  # it is: the deadline moves on
    assert store.moves.call_off_lapsed_restores(now=NOW + 20 + TIMEOUT + 1) == []
    (lapsed,) = store.moves.call_off_lapsed_restores(now=NOW + 30 + TIMEOUT)
    assert lapsed.id == restore.id
    placement = store.nodes.placement(restoring)
    assert placement is not None and (placement.node, placement.moving_to) == ("node-c", None)
    assert store.moves.by_id(restore.id).state == "called_off"  # type: ignore[union-attr]
    # a move between live nodes is its source's to call off, never a restore's
    assert store.nodes.placement(moving).moving_to == "node-b"  # type: ignore[union-attr]
    assert store.moves.by_id(move.id).state == "draining"  # type: ignore[union-attr]
    assert store.moves.call_off_lapsed_restores(now=NOW + 99) == []  # once
    with pytest.raises(MoveCalledOff):
        store.moves.finish(restore, now=NOW + 99, lease=LEASE)  # a late switch changes nothing
    assert store.nodes.placement(restoring).node == "node-c"  # type: ignore[union-attr]
