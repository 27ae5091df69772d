"""An account erase reaches every copy (SPEC §5 ``life:delete``: "account erasure … removes
everything"; ``run:scale-out``). Besides the copy a workspace is placed on (erased by its
node with its engine), a move may have left others: the old copy on the source of a move whose
command died after the switch, the unused copy on the target of a move called off. The moves
records name them (:func:`~gateway.cluster.journal.nodes_keeping_copies`); each such node is asked,
signed, to erase its copy (``POST /internal/v1/workspaces/{id}/erase``,
:mod:`gateway.cluster.move.endpoints`), which it does only for an owner the control plane says is being
erased. What could not be erased — its node down or unregistered, a folder an engine still holds —
is returned, and the caller keeps every row (the moves records included) until a later
``almanac owner erase --finish`` gets it: nothing is forgotten while a copy is left.

A copy on a node declared lost (``almanac node lost``: its disk is gone) is not waited for: there is
nothing left to erase there. Each such copy — the placed one (:func:`placed_on_lost_nodes`) or one
a move left — is audited as ``account.erase.lost_copy`` naming the node, and the erase goes on; it
is remembered too (``erased_copies``), so a lost node that comes back with its disk deletes it.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.cluster.journal import nodes_keeping_copies
from gateway.cluster.move.driver import NodeCalls
from gateway.control.store import ControlPlane
from gateway.errors import MoveFailed


def erase_copies(
    store: ControlPlane,
    secret: str,
    owner_id: str,
    workspace_ids: list[str],
    *,
    clock: Callable[[], float],
) -> list[str]:
    """Have every node the moves records name, besides the placed one, erase its copy of each of
    ``owner_id``'s workspaces; returns what was not erased, each audited as ``account.erase.failed``."""
    left, lost = _erase_copies(store, secret, workspace_ids, clock)
    for workspace_id, name in lost:
        _audit_lost_copy(store, owner_id, workspace_id, name)
    for workspace_id, _ in left:
        store.audit_log.record(
            "account.erase.failed",
            owner_id=owner_id,
            workspace_id=workspace_id,
            detail={"error": "a copy a move left was not deleted on its node"},
        )
    return [what for _, what in left]


def _audit_lost_copy(store: ControlPlane, owner_id: str, workspace_id: str, node: str) -> None:
    """Audited, and remembered: should the node come back with its disk, it deletes the copy."""
    store.lost.remember_copy(node, workspace_id, now=store.database_time())
    store.audit_log.record(
        "account.erase.lost_copy",
        owner_id=owner_id,
        workspace_id=workspace_id,
        detail={
            "node": node,
            "note": "its node was declared lost (its disk is gone): nothing left to erase there",
        },
    )


def placed_on_lost_nodes(store: ControlPlane, owner_id: str, workspace_ids: list[str]) -> set[str]:
    """The workspaces of ``workspace_ids`` placed on a node declared lost, each audited as
    ``account.erase.lost_copy``: there is nothing left to erase on that node, so the erase does
    not wait for it."""
    lost_nodes = {n.name for n in store.nodes.all() if n.lost}
    found = set()
    for workspace_id in workspace_ids:
        placement = store.nodes.placement(workspace_id)
        if placement is not None and placement.node in lost_nodes:
            _audit_lost_copy(store, owner_id, workspace_id, placement.node)
            found.add(workspace_id)
    return found


def _erase_copies(
    store: ControlPlane, secret: str, workspace_ids: list[str], clock: Callable[[], float]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(what was not erased, the copies on lost nodes), each with its workspace."""
    nodes = {n.name: n for n in store.nodes.all()}
    left: list[tuple[str, str]] = []
    lost: list[tuple[str, str]] = []
    calls = NodeCalls(secret, clock)
    try:
        for workspace_id in workspace_ids:
            placement = store.nodes.placement(workspace_id)
            placed = None if placement is None else placement.node
            for name in nodes_keeping_copies(store.moves.of_workspace(workspace_id), placed):
                node = nodes.get(name)
                if node is None:
                    left.append((workspace_id, f"its copy on node {name!r}: that node is not registered"))
                    continue
                if node.lost:
                    lost.append((workspace_id, name))
                    continue
                try:
                    reply = calls.call(node, "POST", workspace_id, "erase")
                except MoveFailed as exc:
                    left.append((workspace_id, f"its copy on node {name!r}: {exc.message}"))
                    continue
                left += [(workspace_id, f"node {name!r}: {path}") for path in reply.get("failed", [])]
    finally:
        calls.close()
    return left, lost
