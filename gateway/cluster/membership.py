"""This process as one node of several (``almanac serve --node NAME --advertise URL``): registered
in the shared control plane at start, then a heartbeat every ``interval`` seconds that also renews
the leases of the workspaces placed on it, then looks after the moves involving this node (calls
off the ones whose command died; :meth:`gateway.cluster.move.endpoints.MoveEndpoints.tend`). The database
calls run in a worker thread, never on the event loop; a failed beat is logged and retried at the
next one (the leases simply age meanwhile).

With a :class:`~gateway.cluster.fencing.Fence` and a :class:`~gateway.cluster.fencing.NameLock`
(every real node), each beat first checks that this process still holds its name, then renews with
its fencing token; a renewal that succeeded moves the fence on. Once another process holds the name,
the beats stop for good (``node.fenced``) and the fence refuses everything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.to_thread

from gateway import logs
from gateway.cluster.fencing import Fence, NameLock
from gateway.control.nodes import NameTaken


class _Beats(Protocol):
    def heartbeat(self, name: str, *, now: float, lease: float, generation: int | None = None) -> int: ...


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
    fence: Fence | None = None,
    lock: NameLock | None = None,
    sync: Callable[[], None] | None = None,
) -> None:
    """Beat until cancelled (or until another process holds the name); after each beat, ``tend``
    (the moves involving this node) if given. ``clock`` is the database's
    (:class:`~gateway.cluster.dbclock.DatabaseClock`), read anew by ``sync`` before each beat."""
    log = logs.get()
    generation = None if fence is None else fence.generation
    while True:
        await anyio.sleep(node.interval)
        if lock is not None:
            state = await anyio.to_thread.run_sync(lock.check)
            if state == "unreachable":
                logs.event(
                    log,
                    logging.WARNING,
                    "node.heartbeat_failed",
                    node=node.name,
                    error="name lock unreachable",
                )
                continue
            if state == "taken":
                return _fenced(fence, node, "its name lock is held by another process")
        began = time.monotonic() if fence is None else fence.monotonic()

        def beat() -> None:
            if sync is not None:
                sync()
            store.heartbeat(node.name, now=clock(), lease=node.lease, generation=generation)

        try:
            await anyio.to_thread.run_sync(beat)
        except NameTaken as exc:
            return _fenced(fence, node, str(exc))
        except Exception as exc:  # the control plane is unreachable for now: try again next beat
            logs.event(log, logging.WARNING, "node.heartbeat_failed", node=node.name, error=str(exc))
            continue
        if fence is not None:
            fence.record_renewal(began)
        if tend is not None:
            try:
                await tend()
            except Exception as exc:  # logged; tried again at the next beat
                logs.event(log, logging.WARNING, "node.tend_moves_failed", node=node.name, error=str(exc))


def _fenced(fence: Fence | None, node: NodeConfig, why: str) -> None:
    if fence is not None:
        fence.name_taken = True
    logs.event(logs.get(), logging.ERROR, "node.fenced", node=node.name, error=why)
