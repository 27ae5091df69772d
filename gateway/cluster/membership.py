"""This process as one node of several (``almanac serve --node NAME --advertise URL``): registered
in the shared control plane at start, then a heartbeat every ``interval`` seconds that also renews
the leases of the workspaces placed on it, then looks after the moves involving this node (calls
off the ones whose command died; :meth:`gateway.cluster.moves.MoveEndpoints.tend`). The database
calls run in a worker thread, never on the event loop; a failed beat is logged and retried at the
next one (the leases simply age meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.to_thread

from gateway import logs


class _Beats(Protocol):
    def heartbeat(self, name: str, *, now: float, lease: float) -> int: ...


@dataclass(frozen=True)
class NodeConfig:
    name: str
    advertise_url: str
    interval: float
    lease: float


async def keep_alive(
    store: _Beats,
    node: NodeConfig,
    clock: Callable[[], float],
    tend: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Beat until cancelled; after each beat, ``tend`` (the moves involving this node) if given."""
    log = logs.get()
    while True:
        await anyio.sleep(node.interval)
        try:
            await anyio.to_thread.run_sync(lambda: store.heartbeat(node.name, now=clock(), lease=node.lease))
        except Exception as exc:  # the control plane is unreachable for now: try again next beat
            logs.event(log, logging.WARNING, "node.heartbeat_failed", node=node.name, error=str(exc))
            continue
        if tend is not None:
            try:
                await tend()
            except Exception as exc:  # logged; tried again at the next beat
                logs.event(log, logging.WARNING, "node.tend_moves_failed", node=node.name, error=str(exc))
