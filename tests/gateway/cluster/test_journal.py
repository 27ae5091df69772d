"""What a move's record leaves to do (``run:scale-out``): which folder is a stale copy a node may
delete, when ``--finish`` may delete the old copy, and what ``almanac node stale`` lists."""

from __future__ import annotations

import pytest

from gateway.cluster.journal import (
    erase_copy_problem,
    finish_problem,
    latest_touching,
    nodes_keeping_copies,
    old_copies,
    stale_copies,
    stale_copy_problem,
)
from gateway.control.records import MoveRecord, Placement, State


def _move(state: State, source: str = "node-a", target: str = "node-b", at: float = 1.0) -> MoveRecord:
    return MoveRecord(f"m{at:g}", "ws_1", source, target, state, at, at)


ON_B = Placement("ws_1", "node-b", 100.0)
ON_A = Placement("ws_1", "node-a", 100.0)
MOVING_A_TO_B = Placement("ws_1", "node-a", 100.0, moving_to="node-b", move_id="m1")


@pytest.mark.req("run:scale-out")
def test_the_old_copy_is_stale_only_once_the_target_holds_and_has_served_the_workspace() -> None:
    assert stale_copy_problem([_move("served")], ON_B, "node-a") is None
    assert stale_copy_problem([_move("cleaned")], ON_B, "node-a") is None
    flipped = stale_copy_problem([_move("flipped")], ON_B, "node-a")  # not served yet: kept
    assert flipped is not None and "does not make this node's copy stale" in flipped
    assert "still places this workspace here" in str(stale_copy_problem([_move("served")], ON_A, "node-a"))
    assert "nowhere" in str(stale_copy_problem([_move("served")], None, "node-a"))
    assert "no move" in str(stale_copy_problem([], ON_B, "node-a"))
    # a later move back to node-a governs: node-a's folder is the data again
    back = [_move("served"), _move("cleaned", "node-b", "node-a", at=2.0)]
    assert stale_copy_problem(back, ON_A, "node-a") is not None


@pytest.mark.req("run:scale-out")
def test_a_called_off_move_s_copy_on_the_target_is_stale_unless_a_move_to_it_is_under_way() -> None:
    assert stale_copy_problem([_move("called_off")], ON_A, "node-b") is None
    assert stale_copy_problem([_move("discarded")], ON_A, "node-b") is None
    again = [_move("called_off"), _move("draining", at=2.0)]
    assert "under way" in str(stale_copy_problem(again, MOVING_A_TO_B, "node-b"))
    assert stale_copy_problem([_move("called_off")], ON_A, "node-a") is not None  # the source keeps its own


@pytest.mark.req("run:scale-out")
def test_finish_is_refused_unless_the_last_move_switched_the_workspace_to_its_target() -> None:
    assert finish_problem(_move("served"), ON_B) is None
    assert finish_problem(_move("flipped"), ON_B) is None  # the target is asked to serve it first
    assert "never moved" in str(finish_problem(None, ON_A))
    assert "still under way" in str(finish_problem(_move("draining"), MOVING_A_TO_B))
    assert "called off" in str(finish_problem(_move("called_off"), ON_A))
    assert "already deleted" in str(finish_problem(_move("cleaned"), ON_B))
    assert "places the workspace on node-a" in str(finish_problem(_move("served"), ON_A))


@pytest.mark.req("run:scale-out")
def test_stale_copies_are_listed_by_node() -> None:
    records = [
        _move("served"),
        MoveRecord("m9", "ws_2", "node-c", "node-a", "called_off", 3.0, 3.0),
        MoveRecord("m8", "ws_3", "node-a", "node-c", "cleaned", 4.0, 4.0),
    ]
    found = [(s.node, s.workspace_id, s.move_id) for s in stale_copies(records)]
    assert found == [("node-a", "ws_1", "m1"), ("node-a", "ws_2", "m9")]
    assert "--finish" in stale_copies(records)[0].why


@pytest.mark.req("run:scale-out")
def test_an_account_erase_reaches_every_copy_the_moves_records_name() -> None:
    # the old copy of a switched move, the unused copy of one called off, both ends of one under way
    assert nodes_keeping_copies([_move("flipped")], "node-b") == ["node-a"]
    assert nodes_keeping_copies([_move("served")], "node-b") == ["node-a"]
    assert nodes_keeping_copies([_move("called_off")], "node-a") == ["node-b"]
    assert nodes_keeping_copies([_move("copied")], "node-a") == ["node-b"]
    # a complete move, or a discarded one, left nothing; the placed copy is not a stale one
    assert nodes_keeping_copies([_move("cleaned"), _move("discarded", at=2)], "node-b") == []
    # an earlier move's old copy counts even when a later move governs the workspace now
    earlier = _move("served", "node-a", "node-b", at=1)
    later = _move("cleaned", "node-b", "node-c", at=2)
    assert nodes_keeping_copies([earlier, later], "node-c") == ["node-a"]
    # a node erases its copy only for an owner being erased, never the placed one
    assert erase_copy_problem(True, ON_B, "node-a") is None
    assert erase_copy_problem(True, None, "node-a") is None
    assert "not being erased" in str(erase_copy_problem(False, ON_B, "node-a"))
    assert "places this workspace here" in str(erase_copy_problem(True, ON_A, "node-a"))
    assert "under way" in str(erase_copy_problem(True, MOVING_A_TO_B, "node-b"))


ON_C = Placement("ws_1", "node-c", 100.0)


@pytest.mark.req("run:scale-out")
def test_every_move_counts_an_earlier_move_s_old_copy_outlives_a_later_move() -> None:
    # moved A -> B, killed after the switch (A keeps its old copy), then B -> C completely
    first = _move("flipped", "node-a", "node-b", at=1)
    second = _move("cleaned", "node-b", "node-c", at=2)
    records = [first, second]
    assert old_copies(records, ON_C) == [first]
    # node-a's copy is stale: the data went on to node-c, which has served it
    assert stale_copy_problem(records, ON_C, "node-a") is None
    # … but not before anyone served it after the switch
    unserved = [first, _move("flipped", "node-b", "node-c", at=2)]
    assert "does not make this node's copy stale" in str(stale_copy_problem(unserved, ON_C, "node-a"))
    assert old_copies(unserved, ON_C) == [unserved[1], first]  # newest first: node-c serves it first
    # both old copies kept: A's and B's
    both = [_move("served", "node-a", "node-b", at=1), _move("served", "node-b", "node-c", at=2)]
    assert [r.source for r in old_copies(both, ON_C)] == ["node-b", "node-a"]
    # a later move naming node-a governs its folder: an old copy it replaced is not listed twice
    back = [_move("served", "node-a", "node-b", at=1), _move("called_off", "node-b", "node-a", at=2)]
    assert old_copies(back, ON_B) == []
    assert stale_copy_problem(back, ON_B, "node-a") is None  # the unused copy of the move called off
    # nothing while a move is under way, nor for the node the workspace is placed on
    assert old_copies(records, Placement("ws_1", "node-c", 100.0, moving_to="node-a", move_id="m3")) == []
    assert old_copies([_move("served", "node-a", "node-b")], ON_A) == []
    assert latest_touching(records, "node-a") is first and latest_touching(records, "node-d") is None
