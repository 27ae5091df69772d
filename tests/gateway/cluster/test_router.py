"""Placement in use (``run:scale-out``): the router over a real control plane (SQLite and
PostgreSQL) places a new workspace on the least-loaded live node, routes every call by its
placement, remembers it only briefly, and refuses — never serves — a workspace whose node is down
or whose lease ran out."""

from __future__ import annotations

import pytest

from gateway.cluster.placement import Forward, Local, Unavailable
from gateway.cluster.router import Router, RouterConfig
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, NodeUnavailable, WorkspaceMoving

pytestmark = pytest.mark.anyio

TIMEOUT = LEASE = 10.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _router(store: ControlPlane, here: str, clock: Clock) -> Router:
    return Router(store, RouterConfig(here, TIMEOUT, LEASE, retry_after=5.0), clock=clock)


def _workspace(store: ControlPlane, who: str) -> str:
    return store.owners.create(f"{who}@example.com", None)[1].id


@pytest.fixture
def clock() -> Clock:
    return Clock(1_900_000_000.0)


@pytest.mark.req("run:scale-out")
async def test_new_workspaces_spread_over_the_nodes_and_every_node_agrees(
    store: ControlPlane, clock: Clock
) -> None:
    for name in ("node-a", "node-b", "node-c"):
        store.nodes.register(name, f"http://{name}:8080", now=clock.now)
    a, b, c = (_router(store, n, clock) for n in ("node-a", "node-b", "node-c"))
    first, second, third = (_workspace(store, w) for w in ("ada", "bob", "cy"))
    assert await a.route(first) == Local()  # least loaded, ties by name: node-a
    assert await c.route(second) == Forward("node-b", "http://node-b:8080")  # node-b now has fewest
    assert await b.route(third) == Forward("node-c", "http://node-c:8080")
    assert await c.route(third) == Local()
    assert await b.route(first) == Forward("node-a", "http://node-a:8080")
    assert {p.node for p in (store.nodes.placement(w) for w in (first, second, third)) if p} == {
        "node-a",
        "node-b",
        "node-c",
    }


@pytest.mark.req("run:scale-out")
async def test_a_workspace_whose_node_is_down_is_refused_everywhere(
    store: ControlPlane, clock: Clock
) -> None:
    store.nodes.register("node-a", "http://node-a:8080", now=clock.now)
    workspace = _workspace(store, "ada")
    a, b = _router(store, "node-a", clock), _router(store, "node-b", clock)
    assert await a.route(workspace) == Local()
    store.nodes.register("node-b", "http://node-b:8080", now=clock.now)
    clock.now += TIMEOUT + 1  # node-a stops beating; node-b goes on
    store.nodes.heartbeat("node-b", now=clock.now, lease=LEASE)
    for router in (a, b):
        where = await router.route(workspace)
        assert isinstance(where, Unavailable), where
        assert where.retry_after == 5.0
    with pytest.raises(NodeUnavailable):
        await b.require_local(workspace)  # no engine for it on node-b either
    assert store.nodes.placement(workspace).node == "node-a"  # type: ignore[union-attr]  # still node-a's
    store.nodes.heartbeat("node-a", now=clock.now, lease=LEASE)  # node-a is back
    a.forget()
    assert await a.route(workspace) == Local()


@pytest.mark.req("run:scale-out")
async def test_the_owner_stops_serving_when_its_lease_runs_out_even_from_memory(
    store: ControlPlane, clock: Clock
) -> None:
    store.nodes.register("node-a", "http://node-a:8080", now=clock.now)
    workspace = _workspace(store, "ada")
    a = Router(store, RouterConfig("node-a", 1000.0, LEASE, retry_after=5.0), ttl=3600.0, clock=clock)
    assert await a.route(workspace) == Local()
    await a.require_local(workspace)
    clock.now += LEASE  # no heartbeat renewed the lease; the remembered row is not consulted anew
    where = await a.route(workspace)
    assert isinstance(where, Unavailable) and "lease" in where.reason
    with pytest.raises(NodeUnavailable, match="lease"):
        await a.require_local(workspace)


@pytest.mark.req("run:scale-out")
async def test_a_placement_is_remembered_briefly_then_asked_again(store: ControlPlane, clock: Clock) -> None:
    store.nodes.register("node-a", "http://node-a:8080", now=clock.now)
    workspace = _workspace(store, "ada")
    b = Router(store, RouterConfig("node-b", TIMEOUT, LEASE, retry_after=5.0), ttl=0.5, clock=clock)
    assert await b.route(workspace) == Forward("node-a", "http://node-a:8080")
    store.nodes.register("node-a", "http://node-a.moved:9090", now=clock.now)
    assert await b.route(workspace) == Forward("node-a", "http://node-a:8080")  # remembered
    clock.now += 0.5
    assert await b.route(workspace) == Forward("node-a", "http://node-a.moved:9090")


@pytest.mark.req("run:scale-out")
async def test_no_live_node_means_503_not_a_placement(store: ControlPlane, clock: Clock) -> None:
    workspace = _workspace(store, "ada")
    where = await _router(store, "node-a", clock).route(workspace)
    assert isinstance(where, Unavailable) and "no live node" in where.reason
    assert store.nodes.placement(workspace) is None


@pytest.mark.req("run:scale-out")
async def test_a_workspace_being_moved_is_refused_everywhere_with_a_short_retry(
    store: ControlPlane, clock: Clock
) -> None:
    for name in ("node-a", "node-c"):
        store.nodes.register(name, f"http://{name}:8080", now=clock.now)
    workspace = _workspace(store, "cy")
    store.nodes.place_on(workspace, "node-c", now=clock.now, lease=LEASE)
    a, c = _router(store, "node-a", clock), _router(store, "node-c", clock)
    assert await c.route(workspace) == Local()
    move = store.moves.begin(workspace, "node-c", "node-a", now=clock.now, timeout=60.0)
    with pytest.raises(BadRequest, match="another move"):
        store.moves.begin(workspace, "node-c", "node-a", now=clock.now, timeout=60.0)
    for router in (a, c):
        router.forget()
        where = await router.route(workspace)
        assert isinstance(where, Unavailable) and where.moving and where.retry_after == 1.0
        with pytest.raises(WorkspaceMoving) as refused:
            await router.require_local(workspace)
        assert refused.value.headers() == {"Retry-After": "1"}
    assert store.moves.abort(move, now=clock.now, reason="a test")  # called off: served where it was
    c.forget()
    assert await c.route(workspace) == Local()
    again = store.moves.begin(workspace, "node-c", "node-a", now=clock.now, timeout=60.0)
    with pytest.raises(BadRequest, match="no longer under way"):  # the move called off cannot flip it
        store.moves.finish(move, now=clock.now, lease=LEASE)
    store.moves.finish(again, now=clock.now, lease=LEASE)
    a.forget()
    c.forget()
    assert await a.route(workspace) == Local()
    assert await c.route(workspace) == Forward("node-a", "http://node-a:8080")
    with pytest.raises(BadRequest, match="no longer under way"):
        store.moves.finish(again, now=clock.now, lease=LEASE)


@pytest.mark.req("run:scale-out")
async def test_a_node_holding_a_workspace_for_a_move_refuses_it_whatever_the_rows_say(
    store: ControlPlane, clock: Clock
) -> None:
    store.nodes.register("node-c", "http://node-c:8080", now=clock.now)
    workspace = _workspace(store, "cy")
    c = _router(store, "node-c", clock)
    assert await c.route(workspace) == Local()
    c.hold(workspace)
    with pytest.raises(WorkspaceMoving):
        await c.require_local(workspace)
    c.unhold(workspace)
    assert await c.route(workspace) == Local()


@pytest.mark.req("run:scale-out")
async def test_a_workspace_whose_folder_is_on_this_node_is_placed_here_not_on_the_least_loaded(
    store: ControlPlane, clock: Clock
) -> None:
    """A workspace from before the nodes: its files are on node-b's disk; node-a has fewer workspaces."""
    for name in ("node-a", "node-b"):
        store.nodes.register(name, f"http://{name}:8080", now=clock.now)
    busy = _workspace(store, "busy")
    store.nodes.place_on(busy, "node-b", now=clock.now, lease=LEASE)
    legacy = _workspace(store, "legacy")
    b = Router(
        store,
        RouterConfig("node-b", TIMEOUT, LEASE, retry_after=5.0),
        clock=clock,
        has_folder=lambda workspace_id: workspace_id == legacy,
    )
    assert await b.route(legacy) == Local()
    assert store.nodes.placement(legacy).node == "node-b"  # type: ignore[union-attr]
    fresh = _workspace(store, "fresh")  # no folder anywhere: the least-loaded node, as ever
    assert await b.route(fresh) == Forward("node-a", "http://node-a:8080")
