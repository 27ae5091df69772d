"""A node lost for good (``run:scale-out``): the control plane's side of ``almanac node lost NAME --confirm``
and of its undo. What a lost node means for routing is :func:`gateway.cluster.placement.route`.

Declaring a node lost is one transaction: the node is marked (``nodes.lost_at``), every move under
way from or to it is called off (its source or target will never answer), and an audit event
``node.lost`` names it with the number of workspaces placed on it. Those placements stay: each
workspace answers ``workspace_lost`` everywhere until it is restored from a backup on another node
(:mod:`gateway.cluster.restore.driver`) — never re-opened empty. A node that heartbeated within the
heartbeat timeout is refused unless forced: it is running, so its disk may well be there.

An account erase does not wait for a lost node's copies; it records each in ``erased_copies``, and
should the node come back with its disk it deletes those folders (:meth:`copies_to_erase`,
called from :meth:`gateway.cluster.move.endpoints.MoveEndpoints.tend`).
"""

from __future__ import annotations

from gateway.control.audit import Audit
from gateway.control.clock import epoch, iso
from gateway.control.db import Database
from gateway.control.moves import Moves
from gateway.control.records import LostNode, LostWorkspace
from gateway.errors import BadRequest


class LostNodes:
    def __init__(self, db: Database, audit: Audit, moves: Moves) -> None:
        self._db, self._audit, self._moves = db, audit, moves

    def workspaces(self) -> list[LostWorkspace]:
        """The workspaces placed on a node declared lost, or on a node running on a volume that is
        not its own (an empty or swapped data directory), by node then workspace id."""
        rows = self._db.execute(
            "SELECT p.node, p.workspace_id, o.email, w.name, n.lost_at FROM placements p "
            "JOIN nodes n ON n.name = p.node JOIN workspaces w ON w.id = p.workspace_id "
            "JOIN owners o ON o.id = w.owner_id WHERE n.lost_at IS NOT NULL OR (n.volume_id IS NOT NULL "
            "AND n.volume_seen IS NOT NULL AND n.volume_seen <> n.volume_id) ORDER BY p.node, p.workspace_id"
        )
        return [
            LostWorkspace(
                str(r[0]),
                str(r[1]),
                str(r[2]),
                str(r[3]),
                "declared lost" if r[4] is not None else "volume not its own",
            )
            for r in rows
        ]

    def mark(self, name: str, *, now: float, heartbeat_timeout: float, force: bool) -> LostNode:
        """Declare ``name`` lost (idempotent). Refused (:class:`BadRequest`, nothing changed) for an
        unknown node, or one heard from within ``heartbeat_timeout`` seconds unless ``force``."""
        with self._db.transaction():
            row = self._db.execute(
                "SELECT heartbeat_at, lost_at, (SELECT count(*) FROM placements WHERE node = ?) "
                "FROM nodes WHERE name = ?",
                (name, name),
            ).fetchone()
            if row is None:
                raise BadRequest(
                    f"no node named {name!r}; `almanac node list` shows the nodes (nothing changed)"
                )
            placed = int(str(row[2]))
            if row[1] is not None:
                return LostNode(name, placed, (), already=True)
            silent = now - epoch(str(row[0]))
            if silent <= heartbeat_timeout and not force:
                raise BadRequest(
                    f"node {name!r} heartbeated {silent:.0f} s ago: it is running, so its disk may well be "
                    "there. Stop it (or wait until it has been silent for placement_lease seconds) and "
                    "declare it lost again, or add --force if you know its disk is gone; nothing changed"
                )
            self._db.execute("UPDATE nodes SET lost_at = ? WHERE name = ?", (iso(now), name))
            moving = self._db.execute(
                "SELECT move_id FROM placements WHERE moving_to IS NOT NULL AND (node = ? OR moving_to = ?)",
                (name, name),
            ).fetchall()
            reason = f"node {name} was declared lost"
            called_off = []
            for (move_id,) in moving:
                move = self._moves.by_id(str(move_id))
                if move is not None and self._moves.abort(move, now=now, reason=reason):
                    called_off.append(move)
            self._audit(
                "node.lost",
                None,
                None,
                None,
                None,
                {"node": name, "workspaces": placed, "moves_called_off": len(called_off), "forced": force},
            )
        return LostNode(name, placed, tuple(called_off), already=False)

    def found(self, name: str) -> int:
        """Undo :meth:`mark`: the node's disk came back after all; it serves the workspaces
        still placed on it again (not those restored elsewhere meanwhile). Returns how many."""
        with self._db.transaction():
            row = self._db.execute(
                "SELECT lost_at, (SELECT count(*) FROM placements WHERE node = ?) FROM nodes WHERE name = ?",
                (name, name),
            ).fetchone()
            if row is None:
                raise BadRequest(
                    f"no node named {name!r}; `almanac node list` shows the nodes (nothing changed)"
                )
            if row[0] is None:
                raise BadRequest(f"node {name!r} is not declared lost; nothing to undo (nothing changed)")
            self._db.execute("UPDATE nodes SET lost_at = NULL WHERE name = ?", (name,))
            placed = int(str(row[1]))
            self._audit("node.found", None, None, None, None, {"node": name, "workspaces": placed})
        return placed

    def remember_copy(self, node: str, workspace_id: str, *, now: float) -> None:
        """An account erase went on without the copy on lost ``node``: should the node come back
        with its disk, it deletes that folder (:meth:`copies_to_erase`)."""
        self._db.execute(
            "INSERT INTO erased_copies (node, workspace_id, recorded_at) VALUES (?, ?, ?) "
            "ON CONFLICT (node, workspace_id) DO NOTHING",
            (node, workspace_id, iso(now)),
        )

    def copies_to_erase(self, node: str) -> list[str]:
        """The workspaces whose folder ``node`` must delete: erased (their row gone) while the node
        was lost."""
        rows = self._db.execute(
            "SELECT workspace_id FROM erased_copies e WHERE node = ? AND NOT EXISTS "
            "(SELECT 1 FROM workspaces w WHERE w.id = e.workspace_id) ORDER BY workspace_id",
            (node,),
        )
        return [str(r[0]) for r in rows]

    def forget_copy(self, node: str, workspace_id: str) -> None:
        self._db.execute(
            "DELETE FROM erased_copies WHERE node = ? AND workspace_id = ?", (node, workspace_id)
        )
