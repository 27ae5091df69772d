"""The control plane's side of moving a workspace between nodes (``run:scale-out``): the placement's
move columns and the ``moves`` record — the only SQL about them. What the records mean is
:mod:`gateway.cluster.journal`.

The drain is a lease. :meth:`begin` marks the placement as moving (every node refuses the
workspace) until ``move_deadline``; the command moving it pushes the deadline forward
(:meth:`advance`) while it works. Once the deadline has passed, the node holding the workspace
calls the move off (:meth:`call_off_lapsed`) and serves it again. Every change is one
conditional ``UPDATE`` keyed by the move's id, so a late step of a move called off — above all
:meth:`finish`, the flip — changes nothing: there is never a second live copy.

Every method takes ``now`` (epoch seconds) from the caller. Moves begun, called off, switched and
cleaned up are audited (``workspace.move.*``) under the workspace's owner.
"""

from __future__ import annotations

import secrets

from gateway.control.audit import Audit
from gateway.control.clock import epoch, iso
from gateway.control.db import Database
from gateway.control.records import MoveRecord, State
from gateway.errors import BadRequest, MoveCalledOff

_MOVES = (
    "SELECT id, workspace_id, source, target, state, began_at, updated_at, note, sync_began_at, "
    "sync_ended_at FROM moves"
)


def _record(row: tuple[object, ...]) -> MoveRecord:
    state: State = str(row[4])  # type: ignore[assignment]  # the CHECK constraint keeps it one of them
    return MoveRecord(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        state,
        epoch(str(row[5])),
        epoch(str(row[6])),
        str(row[7]),
        None if row[8] is None else epoch(str(row[8])),
        None if row[9] is None else epoch(str(row[9])),
    )


class Moves:
    def __init__(self, db: Database, audit: Audit) -> None:
        self._db, self._audit = db, audit

    def by_id(self, move_id: str) -> MoveRecord | None:
        row = self._db.execute(_MOVES + " WHERE id = ?", (move_id,)).fetchone()
        return None if row is None else _record(row)

    def of_workspace(self, workspace_id: str) -> list[MoveRecord]:
        """The workspace's moves, oldest first."""
        rows = self._db.execute(_MOVES + " WHERE workspace_id = ? ORDER BY began_at, id", (workspace_id,))
        return [_record(r) for r in rows]

    def leaving_copies(self) -> list[MoveRecord]:
        """The moves that may have left a copy behind — switched but not cleaned (the old copy on
        the source), called off but not discarded (the unused copy on the target) — of every
        workspace and every move, not only the last: each one unless a later move of its workspace
        names the node keeping that copy (then the later move governs that node's folder)."""
        rows = self._db.execute(
            _MOVES + " m WHERE state IN ('flipped', 'served', 'called_off') AND NOT EXISTS ("
            "SELECT 1 FROM moves later WHERE later.workspace_id = m.workspace_id AND "
            "(later.began_at > m.began_at OR (later.began_at = m.began_at AND later.id > m.id)) AND "
            "(CASE WHEN m.state = 'called_off' THEN m.target ELSE m.source END) "
            "IN (later.source, later.target)"
            ") ORDER BY began_at, id"
        )
        return [_record(r) for r in rows]

    def begin(
        self,
        workspace_id: str,
        source: str,
        target: str,
        *,
        now: float,
        timeout: float,
        copying: bool = False,
    ) -> MoveRecord:
        """Mark the workspace as moving from ``source`` to ``target`` until ``now + timeout``: every
        node refuses its calls until the move flips it, is called off, or lapses — or, ``copying``,
        only from :meth:`begin_final_sync` on (its source serves it while its files are copied).
        Refused when it is not on ``source``, another move of it is under way, or its owner is being
        erased."""
        move = MoveRecord(secrets.token_hex(8), workspace_id, source, target, "draining", now, now)
        with self._db.transaction():
            # the owner's row first (as an account erase's lock-out takes it): no move begins for an
            # owner being erased, and an erase never begins while this move is under way
            kept = self._db.execute(
                "UPDATE owners SET disabled_at = NULL WHERE disabled_at IS NULL AND id = "
                "(SELECT owner_id FROM workspaces WHERE id = ?)",
                (workspace_id,),
            ).rowcount
            if kept == 0:
                raise BadRequest(
                    f"workspace {workspace_id} is not an account's, or its account is being erased: it is "
                    "not moved (nothing changed)"
                )
            moved = self._db.execute(
                "UPDATE placements SET moving_to = ?, move_id = ?, move_deadline = ?, move_copying = ?, "
                "move_sync_ends = NULL WHERE workspace_id = ? AND node = ? AND moving_to IS NULL",
                (target, move.id, iso(now + timeout), int(copying), workspace_id, source),
            ).rowcount
            if moved == 0:
                raise BadRequest(
                    f"workspace {workspace_id} is not on node {source!r}, or another move of it is under "
                    "way; wait for that move to end and try again"
                )
            self._db.execute(
                "INSERT INTO moves (id, workspace_id, source, target, state, began_at, updated_at) "
                "VALUES (?, ?, ?, ?, 'draining', ?, ?)",
                (move.id, workspace_id, source, target, iso(now), iso(now)),
            )
            self._audit_move("workspace.move.begin", move)
        return move

    def advance(self, move_id: str, *, now: float, timeout: float, state: State | None = None) -> None:
        """The move's command is still at work: its deadline becomes ``now + timeout`` (and its
        record ``state``). Raises :class:`MoveCalledOff` when it is no longer under way."""
        with self._db.transaction():
            renewed = self._db.execute(
                "UPDATE placements SET move_deadline = ? WHERE move_id = ? AND moving_to IS NOT NULL",
                (iso(now + timeout), move_id),
            ).rowcount
            if renewed == 0:
                raise MoveCalledOff(f"move {move_id} is no longer under way: it was called off")
            if state is not None:
                self._db.execute(
                    "UPDATE moves SET state = ?, updated_at = ? WHERE id = ?", (state, iso(now), move_id)
                )

    def begin_final_sync(self, move_id: str, *, now: float, timeout: float, ends: float) -> None:
        """The move's final sync begins: every node refuses the workspace from now on (its calls told
        to wait until ``ends``, the sync's expected end), and the deadline becomes ``now + timeout``.
        Raises :class:`MoveCalledOff` when the move is no longer under way."""
        with self._db.transaction():
            marked = self._db.execute(
                "UPDATE placements SET move_copying = 0, move_sync_ends = ?, move_deadline = ? "
                "WHERE move_id = ? AND moving_to IS NOT NULL",
                (iso(ends), iso(now + timeout), move_id),
            ).rowcount
            if marked == 0:
                raise MoveCalledOff(f"move {move_id} is no longer under way: it was called off")
            self._db.execute(
                "UPDATE moves SET sync_began_at = ?, updated_at = ? WHERE id = ?",
                (iso(now), iso(now), move_id),
            )

    def finish(self, move: MoveRecord, *, now: float, lease: float) -> None:
        """Flip the placement to the move's target (its lease starts now) — only while this very
        move is under way: a move called off, or replaced by another, is refused."""
        with self._db.transaction():
            flipped = self._db.execute(
                "UPDATE placements SET node = ?, moving_to = NULL, move_id = NULL, move_deadline = NULL, "
                "move_copying = 0, move_sync_ends = NULL, "
                "lease_expires_at = ?, placed_at = ? "
                "WHERE workspace_id = ? AND node = ? AND moving_to = ? AND move_id = ?",
                (
                    move.target,
                    iso(now + lease),
                    iso(now),
                    move.workspace_id,
                    move.source,
                    move.target,
                    move.id,
                ),
            ).rowcount
            if flipped == 0:
                raise MoveCalledOff(
                    f"the move of workspace {move.workspace_id} to node {move.target!r} is no longer under "
                    "way (it was called off); the workspace stays on "
                    f"{move.source!r}"
                )
            self._db.execute(
                "UPDATE moves SET state = 'flipped', updated_at = ?, sync_ended_at = ? WHERE id = ?",
                (iso(now), iso(now), move.id),
            )
            self._audit_move("workspace.move.flip", move)

    def abort(self, move: MoveRecord, *, now: float, reason: str) -> bool:
        """Call the move off: the workspace stays on its source and is served there again. False
        (nothing changed) when it was no longer under way."""
        with self._db.transaction():
            cleared = self._db.execute(
                "UPDATE placements SET moving_to = NULL, move_id = NULL, move_deadline = NULL, "
                "move_copying = 0, move_sync_ends = NULL "
                "WHERE workspace_id = ? AND node = ? AND move_id = ?",
                (move.workspace_id, move.source, move.id),
            ).rowcount
            if cleared == 0:
                return False
            self._db.execute(
                "UPDATE moves SET state = 'called_off', updated_at = ?, note = ? WHERE id = ?",
                (iso(now), reason, move.id),
            )
            self._audit_move("workspace.move.call_off", move, reason=reason)
        return True

    def call_off_lapsed(self, source: str, *, now: float) -> list[MoveRecord]:
        """Call off every move away from ``source`` whose deadline has passed (its command stopped
        advancing it: killed, its terminal closed). Returns the moves called off."""
        rows = self._db.execute(
            "SELECT move_id FROM placements WHERE node = ? AND moving_to IS NOT NULL AND move_deadline <= ?",
            (source, iso(now)),
        ).fetchall()
        return self._call_off_lapsed([str(r[0]) for r in rows], now=now)

    def call_off_lapsed_restores(self, *, now: float) -> list[MoveRecord]:
        """Call off every restore (a move away from a node declared lost, which never calls anything
        off itself) whose deadline has passed: its workspace is lost again, and the restore's target
        removes what it received (every live node asks, at each heartbeat). Returns them."""
        rows = self._db.execute(
            "SELECT p.move_id FROM placements p JOIN nodes n ON n.name = p.node "
            "WHERE n.lost_at IS NOT NULL AND p.moving_to IS NOT NULL AND p.move_deadline <= ?",
            (iso(now),),
        ).fetchall()
        return self._call_off_lapsed([str(r[0]) for r in rows], now=now)

    def record(self, move_id: str, state: State, *, now: float, note: str = "") -> None:
        """A step after the flip: the target ``served`` it, the source's copy ``cleaned`` up (audited),
        the target's unused copy ``discarded``; or a ``note`` on what failed."""
        with self._db.transaction():
            self._db.execute(
                "UPDATE moves SET state = ?, updated_at = ?, note = ? WHERE id = ?",
                (state, iso(now), note, move_id),
            )
            move = self.by_id(move_id)
            if move is not None and state in ("cleaned", "discarded"):
                self._audit_move(f"workspace.move.{state}", move)

    def _audit_move(self, kind: str, move: MoveRecord, **detail: object) -> None:
        row = self._db.execute(
            "SELECT owner_id FROM workspaces WHERE id = ?", (move.workspace_id,)
        ).fetchone()
        owner = None if row is None else str(row[0])
        self._audit(
            kind,
            owner,
            move.workspace_id,
            None,
            None,
            {"move": move.id, "source": move.source, "target": move.target, **detail},
        )

    def _call_off_lapsed(self, move_ids: list[str], *, now: float) -> list[MoveRecord]:
        """Call off each of these moves whose deadline has still passed (one transaction each; a move
        advanced or flipped meanwhile is left alone)."""
        lapsed = []
        for move_id in move_ids:
            with self._db.transaction():
                cleared = self._db.execute(
                    "UPDATE placements SET moving_to = NULL, move_id = NULL, move_deadline = NULL, "
                    "move_copying = 0, move_sync_ends = NULL "
                    "WHERE move_id = ? AND moving_to IS NOT NULL AND move_deadline <= ?",
                    (move_id, iso(now)),
                ).rowcount
                move = self.by_id(move_id)
                if cleared == 0 or move is None:
                    continue  # advanced or flipped meanwhile
                reason = "its command stopped advancing it before its deadline"
                self._db.execute(
                    "UPDATE moves SET state = 'called_off', updated_at = ?, note = ? WHERE id = ?",
                    (iso(now), reason, move.id),
                )
                self._audit_move("workspace.move.call_off", move, reason=reason)
            lapsed.append(move)
        return lapsed
