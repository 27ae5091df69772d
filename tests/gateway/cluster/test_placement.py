"""Placement decisions (``run:scale-out``): new workspaces go to the least-loaded live node; a
call is served here, forwarded to the owning node, or refused while that node is down."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cluster.placement import (
    Forward,
    Local,
    Unavailable,
    choose_node,
    is_live,
    moving_retry_after,
    route,
)
from gateway.control.nodes import PlacementError
from gateway.control.records import Node, Placement

NOW = 1_900_000_000.0
TIMEOUT = 15.0


def _node(name: str, *, age: float = 1.0, workspaces: int = 0, draining: bool = False) -> Node:
    return Node(name, f"http://{name}.internal:8080", NOW - age, draining, workspaces)


def test_a_node_is_live_while_its_heartbeat_is_younger_than_the_timeout() -> None:
    assert is_live(_node("a", age=TIMEOUT), now=NOW, heartbeat_timeout=TIMEOUT)
    assert not is_live(_node("a", age=TIMEOUT + 0.001), now=NOW, heartbeat_timeout=TIMEOUT)


def test_new_workspaces_go_to_the_least_loaded_live_node_that_is_not_draining() -> None:
    nodes = [
        _node("a", workspaces=5),
        _node("b", workspaces=2),
        _node("c", workspaces=0, age=60),  # dead
        _node("d", workspaces=1, draining=True),
        _node("e", workspaces=2),
    ]
    assert choose_node(nodes, now=NOW, heartbeat_timeout=TIMEOUT).name == "b"  # ties: by name


def test_no_live_node_is_a_clear_refusal() -> None:
    with pytest.raises(PlacementError, match="no live node"):
        choose_node([_node("a", age=60), _node("b", draining=True)], now=NOW, heartbeat_timeout=TIMEOUT)
    with pytest.raises(PlacementError):
        choose_node([], now=NOW, heartbeat_timeout=TIMEOUT)


nodes_st = st.lists(
    st.builds(
        Node,
        name=st.text("abcdefgh", min_size=1, max_size=3),
        advertise_url=st.just("http://x"),
        heartbeat_at=st.floats(NOW - 60, NOW),
        draining=st.booleans(),
        workspaces=st.integers(0, 50),
        lost=st.booleans(),
    ),
    max_size=8,
    unique_by=lambda n: n.name,
)


@given(nodes_st)
def test_the_chosen_node_is_eligible_and_none_eligible_holds_fewer(nodes: list[Node]) -> None:
    eligible = [
        n for n in nodes if not n.draining and not n.lost and is_live(n, now=NOW, heartbeat_timeout=TIMEOUT)
    ]
    if not eligible:
        with pytest.raises(PlacementError):
            choose_node(nodes, now=NOW, heartbeat_timeout=TIMEOUT)
        return
    chosen = choose_node(nodes, now=NOW, heartbeat_timeout=TIMEOUT)
    assert chosen in eligible
    assert all(chosen.workspaces <= n.workspaces for n in eligible)
    assert chosen == choose_node(list(reversed(nodes)), now=NOW, heartbeat_timeout=TIMEOUT)  # any order


def test_a_call_is_served_here_forwarded_or_refused() -> None:
    nodes = [_node("a"), _node("b"), _node("c", age=60)]
    lease = NOW + 30

    def where(node: str, *, here: str = "a", expires: float = lease) -> object:
        return route(
            Placement("ws_1", node, expires),
            nodes,
            here=here,
            now=NOW,
            heartbeat_timeout=TIMEOUT,
            retry_after=5,
        )

    assert where("a") == Local()
    assert where("b") == Forward("b", "http://b.internal:8080")
    down = where("c")
    assert isinstance(down, Unavailable) and down.retry_after == 5 and "'c'" in down.reason
    assert isinstance(where("zz"), Unavailable)  # placed on a node nobody knows
    assert isinstance(where("a", expires=NOW), Unavailable)  # its own lease ran out: not even here
    assert isinstance(where("b", here="b", expires=NOW - 1), Unavailable)


@pytest.mark.req("run:scale-out")
def test_a_workspace_on_a_node_declared_lost_is_refused_everywhere_even_on_that_node() -> None:
    lost = Node("c", "http://c.internal:8080", NOW, False, 3, lost=True)  # it even heartbeats
    nodes = [_node("a"), lost]
    for here in ("a", "c"):
        refused = route(
            Placement("ws_1", "c", NOW + 30),
            nodes,
            here=here,
            now=NOW,
            heartbeat_timeout=TIMEOUT,
            retry_after=5,
        )
        assert isinstance(refused, Unavailable) and refused.lost and not refused.moving
        assert "declared lost" in refused.reason and "almanac workspace restore" in refused.reason
    # while it is being restored from a backup on another node: refused as restoring (a wait), on
    # every node, the target included
    restoring = Placement("ws_1", "c", NOW + 30, moving_to="a", move_id="m1", move_deadline=NOW + 1)
    for here in ("a", "c"):
        during = route(restoring, nodes, here=here, now=NOW, heartbeat_timeout=TIMEOUT, retry_after=5)
        assert isinstance(during, Unavailable) and during.restoring and not during.lost
        assert during.retry_after > 0 and "restored from a backup onto node 'a'" in during.reason
    # its command stopped and its deadline passed (before any node called it off): lost again
    lapsed = route(restoring, nodes, here="a", now=NOW + 1, heartbeat_timeout=TIMEOUT, retry_after=5)
    assert isinstance(lapsed, Unavailable) and lapsed.lost and not lapsed.restoring
    assert "stopped half-way" in lapsed.reason and "--abandon" in lapsed.reason
    # and it takes nothing new, however few workspaces it holds
    assert choose_node([_node("a", workspaces=9), lost], now=NOW, heartbeat_timeout=TIMEOUT).name == "a"


@pytest.mark.req("run:scale-out")
def test_a_moving_workspace_is_served_by_its_source_until_the_final_sync_then_told_how_long_to_wait() -> None:
    nodes = [_node("a"), _node("b")]
    copying = Placement(
        "ws_1", "a", NOW + 30, moving_to="b", move_id="m1", move_deadline=NOW + 60, move_copying=True
    )
    assert route(copying, nodes, here="a", now=NOW, heartbeat_timeout=TIMEOUT, retry_after=5) == Local()
    through_b = route(copying, nodes, here="b", now=NOW, heartbeat_timeout=TIMEOUT, retry_after=5)
    assert through_b == Forward("a", "http://a.internal:8080")  # the target serves nothing yet
    syncing = Placement(
        "ws_1", "a", NOW + 30, moving_to="b", move_id="m1", move_deadline=NOW + 60, move_sync_ends=NOW + 2.4
    )
    for here, now, wait in (("a", NOW, 2.4), ("b", NOW + 2.0, 1.0), ("b", NOW + 9.0, 1.0)):
        refused = route(syncing, nodes, here=here, now=now, heartbeat_timeout=TIMEOUT, retry_after=5)
        assert isinstance(refused, Unavailable) and refused.moving
        assert refused.retry_after == pytest.approx(wait)  # counting down, at least a second
    assert moving_retry_after(None, now=NOW) == 1.0  # a move marked without an estimate
