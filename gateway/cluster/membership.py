"""This process as one node of several (``almanac serve --node NAME --advertise URL``): registered
in the shared control plane at start, then a heartbeat every ``interval`` seconds that also renews
the leases of the workspaces placed on it. The database calls run in a worker thread, never on the
event loop; a failed beat is logged and retried at the next one (the leases simply age meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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


async def keep_alive(store: _Beats, node: NodeConfig, clock: Callable[[], float]) -> None:
    """Beat until cancelled."""
    log = logs.get()
    while True:
        await anyio.sleep(node.interval)
        try:
            await anyio.to_thread.run_sync(lambda: store.heartbeat(node.name, now=clock(), lease=node.lease))
        except Exception as exc:  # the control plane is unreachable for now: try again next beat
            logs.event(log, logging.WARNING, "node.heartbeat_failed", node=node.name, error=str(exc))
