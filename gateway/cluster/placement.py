"""Where a workspace is served, decided from the control plane's ``nodes`` and ``placements`` rows
(``run:scale-out``). Pure functions over frozen records, and :func:`place`, which applies
:func:`choose_node` to the control plane; the SQL that reads and writes those rows is
:mod:`gateway.control.nodes`.

A *node* is one ``almanac serve`` with its own data directory. It is *live* while its heartbeat is
younger than the heartbeat timeout and it is not draining. A workspace is *placed* on exactly one
node, and that placement is a *lease*: the node renews it with each heartbeat, and a node whose
lease has run out (it lost the control plane, or died) must not serve the workspace until it renews
it. A workspace whose node is not live is unavailable (503 + Retry-After); it is never opened on a
second node, because its files are on the first one's disk.

A node an operator declared *lost* (``almanac node lost NAME --confirm``: its disk is gone for good)
serves nothing, whatever its heartbeat says, and takes nothing new; its workspaces are *lost* (a
clear refusal naming the situation) until each is restored from a backup on another node.

A node whose running process found, in its data directory, a volume identity other than the one
recorded at its first start (an empty or swapped volume: :mod:`gateway.cluster.volume`) is
*misplaced*: it takes nothing new, and its workspaces are refused as lost (503, the operator can mend
it) until it is started again on its own volume — never served empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gateway.control.nodes import Nodes, PlacementError
from gateway.control.records import Node, Placement


@dataclass(frozen=True)
class Local:
    """Serve it here."""


@dataclass(frozen=True)
class Forward:
    """Send the call to the owning node."""

    node: str
    url: str


@dataclass(frozen=True)
class Unavailable:
    """Refuse with 503 and ``Retry-After: retry_after``; nothing is started anywhere."""

    reason: str
    retry_after: float
    moving: bool = False  # refused because it is being moved (a short wait), not because a node is down
    lost: bool = False  # its node was declared lost: no wait brings it back, a restore from a backup does
    restoring: bool = False  # being restored from a backup onto another node (its node was declared lost)
    volume: bool = False  # lost because its node runs on a volume not its own (503: the operator can mend it)


#: The least a call for a workspace being moved is told to wait (seconds); more while the final
#: sync is expected to last longer (:func:`moving_retry_after`).
MOVING_RETRY_AFTER = 1.0
#: What a call for a workspace being restored from a backup is told to wait (seconds).
RESTORING_RETRY_AFTER = 5.0

Route = Local | Forward | Unavailable


def moving_retry_after(sync_ends: float | None, *, now: float) -> float:
    """What a call refused during a move's final sync is told to wait: until the sync's expected end,
    at least :data:`MOVING_RETRY_AFTER` (rounded up to whole seconds when rendered)."""
    if sync_ends is None:
        return MOVING_RETRY_AFTER
    return max(MOVING_RETRY_AFTER, sync_ends - now)


def is_live(node: Node, *, now: float, heartbeat_timeout: float) -> bool:
    """Heard from within ``heartbeat_timeout`` seconds (a node draining is still live: it serves
    what it holds, it only takes nothing new)."""
    return now - node.heartbeat_at <= heartbeat_timeout


def choose_node(nodes: Iterable[Node], *, now: float, heartbeat_timeout: float) -> Node:
    """The node a new workspace goes to: the live, non-draining node not declared lost nor misplaced
    with the fewest workspaces (ties: the name first in order, so every gateway picks the same one)."""
    candidates = [
        n
        for n in nodes
        if not n.draining
        and not n.lost
        and not n.misplaced
        and is_live(n, now=now, heartbeat_timeout=heartbeat_timeout)
    ]
    if not candidates:
        raise PlacementError("no live node takes new workspaces; start a node or end a drain")
    return min(candidates, key=lambda n: (n.workspaces, n.name))


def place(
    nodes: Nodes, workspace_id: str, *, now: float, heartbeat_timeout: float, lease: float
) -> Placement:
    """Where ``workspace_id`` lives, placing it on the node :func:`choose_node` picks if it is nowhere
    yet. Raises :class:`~gateway.control.nodes.PlacementError` when no node can take it."""
    existing = nodes.placement(workspace_id)
    if existing is not None:
        return existing
    chosen = choose_node(nodes.all(), now=now, heartbeat_timeout=heartbeat_timeout)
    return nodes.place(workspace_id, chosen.name, now=now, lease=lease)


def route(
    placement: Placement,
    nodes: Iterable[Node],
    *,
    here: str,
    now: float,
    heartbeat_timeout: float,
    retry_after: float,
) -> Route:
    """Where a call for ``placement``'s workspace goes, seen from the node named ``here``."""
    owner = next((n for n in nodes if n.name == placement.node), None)
    if placement.moving_to is not None and owner is not None and owner.lost:  # a restore
        return restore_under_way(placement, owner.name, now=now)
    if placement.moving_to is not None and not placement.move_copying:
        return Unavailable(
            f"this workspace is being moved to node {placement.moving_to!r}",
            moving_retry_after(placement.move_sync_ends, now=now),
            moving=True,
        )
    if owner is not None and owner.lost:  # whatever its heartbeat says: even the lost node itself
        return Unavailable(
            f"its node {owner.name!r} was declared lost (its disk is gone); the operator restores the "
            "workspace from a backup on another node (almanac workspace restore)",
            retry_after,
            lost=True,
        )
    if owner is not None and owner.misplaced:
        return Unavailable(
            f"its node {owner.name!r} runs on a data directory that is not its own (its volume identity is "
            "not the one recorded at its first start: an empty or swapped volume), so its copy is not "
            "there; the operator starts the node again on its own volume, or declares it lost and "
            "restores the workspace from a backup (almanac node lost)",
            0.0,
            lost=True,
            volume=True,
        )
    if owner is None:
        return Unavailable(f"node {placement.node!r} is not registered", retry_after)
    if not is_live(owner, now=now, heartbeat_timeout=heartbeat_timeout):
        return Unavailable(f"node {owner.name!r} has not been heard from", retry_after)
    if placement.lease_expires_at <= now:
        return Unavailable(f"the lease of node {owner.name!r} on this workspace has run out", retry_after)
    if owner.name == here:
        return Local()
    return Forward(owner.name, owner.advertise_url)


def restore_lapsed(placement: Placement, *, now: float) -> bool:
    """Whether the restore (or move) marked on ``placement`` has outlived its deadline: its command
    stopped half-way, and nothing of the half-sent copy may be served."""
    return placement.move_deadline is not None and placement.move_deadline <= now


def restore_under_way(placement: Placement, lost: str, *, now: float) -> Unavailable:
    """A workspace of lost node ``lost`` marked as being restored onto ``placement.moving_to``:
    503 ``workspace_restoring`` while its command works; once its deadline has passed (the command
    stopped half-way), lost again — nothing of the half-sent copy is ever served."""
    if restore_lapsed(placement, now=now):
        return Unavailable(
            f"its node {lost!r} was declared lost, and a restore of it onto node {placement.moving_to!r} "
            "stopped half-way (nothing of it is served); the operator runs the restore again, or abandons "
            "it (almanac workspace restore … --abandon)",
            0.0,
            lost=True,
        )
    return Unavailable(
        f"this workspace is being restored from a backup onto node {placement.moving_to!r} (its node "
        f"{lost!r} was declared lost); it is served once every file is checked",
        RESTORING_RETRY_AFTER,
        restoring=True,
    )


def owner_condition(placement: Placement | None, nodes: Iterable[Node], *, now: float) -> str | None:
    """What the owner's home page says of a workspace: ``"lost"`` (its node was declared lost),
    ``"restoring"`` (being restored from a backup, its command at work), or None (nothing to say)."""
    if placement is None:
        return None
    owner = next((n for n in nodes if n.name == placement.node), None)
    if owner is None or not owner.lost:
        return None
    if placement.moving_to is not None and not restore_lapsed(placement, now=now):
        return "restoring"
    return "lost"
