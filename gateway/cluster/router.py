"""Where each call goes, in node mode (``run:scale-out``): the I/O shell around the pure
:func:`~gateway.cluster.placement.route`.

Every call asks :meth:`Router.route` for its workspace. The placement row and the node list are
read from the control plane off the event loop and reused for ``ttl`` seconds (half a second by
default). Reusing them never lets a node serve past its lease: a remembered row can only be older,
so its lease looks shorter and its heartbeat staler than they are. A workspace that has no
placement yet is placed on the least-loaded live node (the first call places it) — unless this
node's disk already holds its folder (a workspace from before the nodes): then it is placed here.

:meth:`Router.require_local` is the supervisor's admission check: no engine is ever started for a
workspace this node does not hold the lease of, whichever page, API or call asks for it.

With a :class:`~gateway.cluster.fencing.Fence`, a call this node would serve itself is refused
(503 ``node_unavailable``) while the fence says its leases may not hold. When the control plane
cannot be reached, a workspace seen before is routed from what was last read (it can only look older:
a lease this node held runs out on time), and one never seen is refused with 503
``control_plane_unavailable`` and ``Retry-After``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.asgi import off_loop
from gateway.cluster.fencing import Fence
from gateway.cluster.placement import Forward, Local, Route, Unavailable, moving_retry_after, place, route
from gateway.control.nodes import PlacementError
from gateway.control.records import Node, Placement
from gateway.control.store import ControlPlane
from gateway.errors import (
    ControlPlaneUnavailable,
    NodeUnavailable,
    WorkspaceLost,
    WorkspaceMoving,
    WorkspaceRestoring,
    WorkspaceVolumeMissing,
)

#: How long a placement and the node list are reused (seconds).
TTL_S = 0.5
#: How long a placement refused by a move's final sync is reused (seconds): the switch that ends
#: the refusal is seen within this.
REFUSING_TTL_S = 0.05


@dataclass(frozen=True)
class RouterConfig:
    here: str  # this node's name
    heartbeat_timeout: float  # a node not heard from for this long is down
    lease: float  # a new placement's first lease
    retry_after: float  # what a refused call is told


@dataclass(frozen=True)
class _Seen:
    placement: Placement
    nodes: tuple[Node, ...]
    fetched: float


class Router:
    def __init__(
        self,
        store: ControlPlane,
        config: RouterConfig,
        *,
        ttl: float = TTL_S,
        clock: Callable[[], float] = time.time,
        has_folder: Callable[[str], bool] = lambda workspace_id: False,
        fence: Fence | None = None,
    ) -> None:
        self.store, self.config, self.ttl, self.clock = store, config, ttl, clock
        self.fence = fence
        self.has_folder = has_folder  # whether this node's disk holds the workspace's folder
        self._seen: dict[str, _Seen] = {}
        # being moved away from here (the move's final sync): refused whatever the rows say, each
        # call told to wait until the sync's expected end
        self._held: dict[str, float] = {}

    def hold(self, workspace_id: str, *, until: float | None = None) -> None:
        """Refuse ``workspace_id`` here from now on (a move away from this node is in its final sync,
        expected to end at ``until``)."""
        self._held[workspace_id] = self.clock() if until is None else until

    @property
    def held(self) -> frozenset[str]:
        return frozenset(self._held)

    def unhold(self, workspace_id: str) -> None:
        self._held.pop(workspace_id, None)
        self.forget(workspace_id)

    def _lookup(self, workspace_id: str, now: float) -> _Seen:
        placement = self.store.nodes.placement(workspace_id)
        if placement is None and self.has_folder(workspace_id):
            # a workspace from before the nodes (or placed nowhere yet) whose folder is on this disk:
            # it is served where its files are, never opened empty on the least-loaded node
            placement = self.store.nodes.place_on(
                workspace_id, self.config.here, now=now, lease=self.config.lease
            )
        if placement is None:
            placement = place(
                self.store.nodes,
                workspace_id,
                now=now,
                heartbeat_timeout=self.config.heartbeat_timeout,
                lease=self.config.lease,
            )
        return _Seen(placement, tuple(self.store.nodes.all()), now)

    async def route(self, workspace_id: str) -> Route:
        """Serve here, forward to the owner, or refuse (503 + Retry-After) — never a second engine."""
        now = self.clock()
        until = self._held.get(workspace_id)
        if until is not None:
            return Unavailable(
                "this workspace is being moved away from this node",
                moving_retry_after(until, now=now),
                moving=True,
            )
        seen = self._seen.get(workspace_id)
        if seen is None or not 0.0 <= now - seen.fetched < self._ttl_of(seen):
            try:
                seen = await off_loop(self._lookup, workspace_id, now)
            except PlacementError as exc:
                return Unavailable(str(exc), self.config.retry_after)
            except ControlPlaneUnavailable:
                if seen is None:  # nobody can say who owns it
                    raise
                # what was last read: its leases and heartbeats only look older than they are
            except Exception as exc:  # any other failure of the control plane: the same, as a 503
                if seen is None:
                    return Unavailable(
                        f"the control plane cannot say where this workspace lives ({exc})",
                        self.config.retry_after,
                    )
            else:
                self._seen[workspace_id] = seen
                if len(self._seen) > 10_000:
                    self._seen.pop(next(iter(self._seen)))
        where = route(
            seen.placement,
            seen.nodes,
            here=self.config.here,
            now=self.clock(),
            heartbeat_timeout=self.config.heartbeat_timeout,
            retry_after=self.config.retry_after,
        )
        if isinstance(where, Local) and self.fence is not None:
            refused = self.fence.refusal(self.clock())
            if refused is not None:
                return Unavailable(refused[0], refused[1])
        return where

    def _ttl_of(self, seen: _Seen) -> float:
        """How long a placement read is reused: :data:`REFUSING_TTL_S` while a move's final sync
        refuses it (its switch is then seen at once), else ``ttl``."""
        placement = seen.placement
        if placement.moving_to is not None and not placement.move_copying:
            return min(self.ttl, REFUSING_TTL_S)
        return self.ttl

    def forget(self, workspace_id: str | None = None) -> None:
        """Ask the control plane again next time (for one workspace, or all)."""
        if workspace_id is None:
            self._seen.clear()
        else:
            self._seen.pop(workspace_id, None)

    async def require_local(self, workspace_id: str) -> None:
        """Raise :class:`NodeUnavailable` unless this node holds ``workspace_id``'s lease now (placed
        elsewhere: the cached placement is dropped, since whoever asked saw it here — look again)."""
        where = await self.route(workspace_id)
        if isinstance(where, Local):
            return
        if isinstance(where, Forward):
            self.forget(workspace_id)
            raise NodeUnavailable(
                f"this workspace is served by node {where.node!r}, not this one; try again",
                retry_after=self.config.retry_after,
            )
        raise unavailable(where)


def unavailable(
    where: Unavailable,
) -> NodeUnavailable | WorkspaceMoving | WorkspaceRestoring | WorkspaceLost:
    """The error a refused call gets."""
    if where.volume:
        return WorkspaceVolumeMissing(f"this workspace cannot be served: {where.reason}", retry_after=0.0)
    if where.lost:
        return WorkspaceLost(f"this workspace cannot be served: {where.reason}", retry_after=0.0)
    if where.restoring:
        return WorkspaceRestoring(where.reason + "; try again in a moment", retry_after=where.retry_after)
    if where.moving:
        return WorkspaceMoving(where.reason + "; try again in a moment", retry_after=where.retry_after)
    return NodeUnavailable(
        f"this workspace cannot be served now: {where.reason}", retry_after=where.retry_after
    )
