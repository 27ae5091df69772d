"""The record of moves and the drain as a lease (``run:scale-out``), on SQLite and PostgreSQL: a move
is begun with a deadline its command pushes forward; once the deadline passes the source calls it
off, and a late flip of it changes nothing; every step is recorded and audited."""

from __future__ import annotations

import pytest

from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, MoveCalledOff

NOW = 1_900_000_000.0
LEASE, TIMEOUT = 30.0, 10.0


def _placed(store: ControlPlane, who: str, node: str = "node-a") -> str:
    for name in ("node-a", "node-b"):
        store.nodes.register(name, f"http://{name}:8080", now=NOW)
    workspace = store.owners.create(f"{who}@example.com", None)[1].id
    store.nodes.place_on(workspace, node, now=NOW, lease=LEASE)
    return workspace


@pytest.mark.req("run:scale-out")
def test_a_move_lapses_at_its_deadline_and_a_late_flip_changes_nothing(store: ControlPlane) -> None:
    workspace = _placed(store, "ada")
    move = store.moves.begin(workspace, "node-a", "node-b", now=NOW, timeout=TIMEOUT)
    placement = store.nodes.placement(workspace)
    assert placement is not None
    assert (placement.moving_to, placement.move_id, placement.move_deadline) == (
        "node-b",
        move.id,
        NOW + TIMEOUT,
    )
    with pytest.raises(BadRequest, match="another move"):
        store.moves.begin(workspace, "node-a", "node-b", now=NOW, timeout=TIMEOUT)
    # the command advances it: the deadline moves, the record says how far it got
    store.moves.advance(move.id, now=NOW + 8, timeout=TIMEOUT, state="copied")
    assert store.nodes.placement(workspace).move_deadline == NOW + 18  # type: ignore[union-attr]
    assert store.moves.call_off_lapsed("node-a", now=NOW + 17) == []  # not yet
    assert store.moves.call_off_lapsed("node-b", now=NOW + 99) == []  # only the source calls it off
    (lapsed,) = store.moves.call_off_lapsed("node-a", now=NOW + 18)
    assert lapsed.id == move.id
    after = store.nodes.placement(workspace)
    assert after is not None and (after.node, after.moving_to, after.move_id) == ("node-a", None, None)
    record = store.moves.by_id(move.id)
    assert record is not None and record.state == "called_off" and "stopped advancing" in record.note
    # the command, late: it can neither advance nor flip the move, nor call it off twice
    with pytest.raises(MoveCalledOff):
        store.moves.advance(move.id, now=NOW + 19, timeout=TIMEOUT)
    with pytest.raises(MoveCalledOff, match="no longer under way"):
        store.moves.finish(move, now=NOW + 19, lease=LEASE)
    assert not store.moves.abort(move, now=NOW + 19, reason="late")
    assert store.nodes.placement(workspace).node == "node-a"  # type: ignore[union-attr]
    assert store.moves.call_off_lapsed("node-a", now=NOW + 99) == []
    kinds = [e.kind for e in store.audit_log.events(limit=10) if e.workspace_id == workspace]
    assert kinds[:2] == ["workspace.move.call_off", "workspace.move.begin"]


@pytest.mark.req("run:scale-out")
def test_a_move_s_steps_are_recorded_and_a_newer_move_replaces_the_record_that_counts(
    store: ControlPlane,
) -> None:
    workspace = _placed(store, "bob")
    first = store.moves.begin(workspace, "node-a", "node-b", now=NOW, timeout=TIMEOUT)
    assert store.moves.abort(first, now=NOW + 1, reason="the copy differs")
    assert [m.id for m in store.moves.leaving_copies()] == [first.id]  # the target may hold a copy
    second = store.moves.begin(workspace, "node-a", "node-b", now=NOW + 2, timeout=TIMEOUT)
    with pytest.raises(MoveCalledOff):  # the first move's id flips nothing
        store.moves.finish(first, now=NOW + 3, lease=LEASE)
    store.moves.finish(second, now=NOW + 3, lease=LEASE)
    placement = store.nodes.placement(workspace)
    assert placement is not None and (placement.node, placement.moving_to) == ("node-b", None)
    assert placement.lease_expires_at == NOW + 3 + LEASE
    assert [m.id for m in store.moves.leaving_copies()] == [second.id]  # the last move counts
    store.moves.record(second.id, "served", now=NOW + 4)
    store.moves.record(second.id, "cleaned", now=NOW + 5)
    assert store.moves.leaving_copies() == []
    assert [(m.id, m.state) for m in store.moves.of_workspace(workspace)] == [
        (first.id, "called_off"),
        (second.id, "cleaned"),
    ]
    kinds = [e.kind for e in store.audit_log.events(limit=10) if e.workspace_id == workspace]
    assert kinds[:3] == ["workspace.move.cleaned", "workspace.move.flip", "workspace.move.begin"]
    owner = store.owners.by_email("bob@example.com").id
    assert all(e.owner_id == owner for e in store.audit_log.events(limit=5) if e.workspace_id == workspace)


@pytest.mark.req("run:scale-out")
def test_erasing_an_owner_forgets_the_moves_of_their_workspaces(store: ControlPlane) -> None:
    workspace = _placed(store, "cy")
    kept = _placed(store, "dee")
    for moved in (workspace, kept):
        store.moves.abort(
            store.moves.begin(moved, "node-a", "node-b", now=NOW, timeout=TIMEOUT), now=NOW, reason="x"
        )
    owner = store.owners.by_email("cy@example.com").id
    store.erasure.lock_out_owner(owner, remote=None)
    store.erasure.forget_owner(owner)
    assert store.moves.of_workspace(workspace) == []
    assert [m.workspace_id for m in store.moves.of_workspace(kept)] == [kept]  # nobody else's


@pytest.mark.req("run:scale-out")
def test_every_move_that_left_a_copy_is_listed_not_only_the_last(store: ControlPlane) -> None:
    workspace = _placed(store, "eve")
    store.nodes.register("node-c", "http://node-c:8080", now=NOW)
    # A -> B switched, its old copy kept on node-a (the command died) …
    first = store.moves.begin(workspace, "node-a", "node-b", now=NOW, timeout=TIMEOUT)
    store.moves.finish(first, now=NOW + 1, lease=LEASE)
    # … then B -> C completely: node-a's copy is still listed, node-b's is not (it was cleaned)
    second = store.moves.begin(workspace, "node-b", "node-c", now=NOW + 2, timeout=TIMEOUT)
    store.moves.finish(second, now=NOW + 3, lease=LEASE)
    assert [m.id for m in store.moves.leaving_copies()] == [first.id, second.id]
    store.moves.record(second.id, "cleaned", now=NOW + 4)
    assert [m.id for m in store.moves.leaving_copies()] == [first.id]
    # a later move naming node-a (one to it, called off) governs node-a's folder from then on
    third = store.moves.begin(workspace, "node-c", "node-a", now=NOW + 5, timeout=TIMEOUT)
    assert [m.id for m in store.moves.leaving_copies()] == []  # under way: nothing listed
    store.moves.abort(third, now=NOW + 6, reason="node-a already had a folder")
    assert [m.id for m in store.moves.leaving_copies()] == [third.id]
