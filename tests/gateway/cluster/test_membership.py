"""A node's heartbeat (``run:scale-out``): it beats on its interval off the event loop, renews its
workspaces' leases, and a failed beat is logged and retried, never fatal."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
import pytest

from gateway.cluster.membership import NodeConfig, keep_alive
from gateway.cluster.placement import place
from gateway.control.store import ControlPlane

pytestmark = pytest.mark.anyio
NODE = NodeConfig("node-a", "http://node-a", interval=0.05, lease=30.0)


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded, polling) for ``condition``."""
    with anyio.move_on_after(10) as scope:
        while not condition():
            await anyio.sleep(0.01)
    if scope.cancelled_caught:
        raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.req("run:scale-out")
async def test_the_heartbeat_renews_the_node_and_its_leases(store: ControlPlane) -> None:
    started = time.time()
    store.nodes.register(NODE.name, NODE.advertise_url, now=started - 100)
    ws = store.owners.create("ada@example.com", None)[1].id
    place(store.nodes, ws, now=started - 100, heartbeat_timeout=1000, lease=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(keep_alive, store.nodes, NODE, time.time)
        await _until(lambda: store.nodes.all()[0].heartbeat_at >= started, "a heartbeat")
        await _until(
            lambda: (p := store.nodes.placement(ws)) is not None and p.lease_expires_at >= started + 30,
            "lease",
        )
        tg.cancel_scope.cancel()


class _Flaky:
    """The real control plane, except that its first heartbeat fails (the database away)."""

    def __init__(self, store: ControlPlane) -> None:
        self.store, self.calls = store, 0

    def heartbeat(self, name: str, *, now: float, lease: float, generation: int | None = None) -> int:
        self.calls += 1
        if self.calls == 1:
            raise OSError("connection refused")
        return self.store.nodes.heartbeat(name, now=now, lease=lease, generation=generation)


@pytest.mark.req("run:scale-out")
async def test_a_failed_heartbeat_is_logged_and_the_next_one_goes_through(
    store: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.time()
    store.nodes.register(NODE.name, NODE.advertise_url, now=started - 100)
    flaky = _Flaky(store)
    with caplog.at_level(logging.WARNING):
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_alive, flaky, NODE, time.time)
            await _until(
                lambda: store.nodes.all()[0].heartbeat_at >= started, "a heartbeat after the failure"
            )
            tg.cancel_scope.cancel()
    assert flaky.calls >= 2
    assert any("node.heartbeat_failed" in r.getMessage() for r in caplog.records)
