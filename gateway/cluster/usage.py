"""``almanac workspace usage`` for a workspace placed on another node (``run:scale-out``): that node
measures its folder and answers over the signed internal API
(``GET /internal/v1/workspaces/{id}/usage``); a node that is down, declared lost or unreachable is
said to be unavailable, never measured as an empty local folder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.cluster.move.driver import NodeCalls
from gateway.cluster.placement import is_live
from gateway.control.records import Node
from gateway.control.store import ControlPlane
from gateway.errors import GatewayError, NodeUnavailable


@dataclass(frozen=True)
class NodeUsage:
    node: str
    folder: str  # the workspace's folder on that node
    held: bool  # whether that node has the folder at all
    rows: tuple[tuple[str, str], ...]  # as :meth:`gateway.control.usage.Usage.rows`


def node_state(node: Node, *, now: float, heartbeat_timeout: float) -> str:
    """What ``almanac node list`` and ``workspace list`` say of a node: live, down, lost or
    volume-mismatch (``now``: the database's clock)."""
    if node.lost:
        return "lost"
    if node.misplaced:
        return "volume-mismatch"
    return "live" if is_live(node, now=now, heartbeat_timeout=heartbeat_timeout) else "down"


def usage_on(
    store: ControlPlane,
    workspace_id: str,
    name: str,
    *,
    secret: str,
    heartbeat_timeout: float,
    clock: Callable[[], float],
) -> NodeUsage:
    """Node ``name``'s figures for its folder of ``workspace_id``; raises
    :class:`~gateway.errors.NodeUnavailable` when it cannot give them."""
    node = next((n for n in store.nodes.all() if n.name == name), None)
    if node is None:
        raise NodeUnavailable(f"node {name!r} unavailable: it is not registered", retry_after=0.0)
    state = node_state(node, now=clock(), heartbeat_timeout=heartbeat_timeout)
    if state != "live":
        why = {
            "lost": "it was declared lost (its disk is gone)",
            "volume-mismatch": "it runs on a data directory that is not its own",
            "down": f"not heard from within {heartbeat_timeout:g} s",
        }[state]
        raise NodeUnavailable(f"node {name!r} unavailable: {why}; try again once it is back", retry_after=0.0)
    calls = NodeCalls(secret, clock)
    try:
        found = calls.call(node, "GET", workspace_id, "usage")
    except GatewayError as exc:
        raise NodeUnavailable(f"node {name!r} unavailable: {exc.message}", retry_after=0.0) from None
    finally:
        calls.close()
    rows = tuple((str(label), str(value)) for label, value in found.get("rows", []))
    return NodeUsage(name, str(found.get("folder", "")), bool(found.get("held")), rows)
