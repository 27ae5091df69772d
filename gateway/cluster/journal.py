"""The record of moves (``run:scale-out``): how far each move of a workspace got, and what that
leaves to do. Pure functions over frozen records (:class:`~gateway.control.records.MoveRecord`); the SQL is
:mod:`gateway.control.moves`.

A move goes ``draining`` (begun: its files are copied while the source serves it, then a final sync
refuses it everywhere while the source releases it and the target catches up) →
``copied`` (the target holds a checked copy) → ``flipped`` (the placement names the target) →
``served`` (the target started the workspace on its copy) → ``cleaned`` (the source's old copy is
deleted). A move stopped before the flip is ``called_off`` (by its command, or by the source node
once the move's deadline passed), then ``discarded`` once the target removed its unused copy.

What is left on disk follows from the state: a ``flipped`` or ``served`` move leaves the old copy on
the source (``almanac workspace move --finish`` deletes it); a ``called_off`` one may leave an unused
copy on the target (that node removes it by itself). Every move counts, not only a workspace's
last: a workspace moved A → B (the old copy kept on A) and then B → C still has A's copy to delete.
What a node's folder is follows from the newest move that names that node.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.control.records import MoveRecord, Placement, State

#: Under way: the workspace is refused everywhere while the move holds one of these.
UNDER_WAY: tuple[State, ...] = ("draining", "copied")
#: Switched to the target, the old copy still on the source.
OLD_COPY_KEPT: tuple[State, ...] = ("flipped", "served")


@dataclass(frozen=True)
class StaleCopy:
    """A folder a node keeps that is not the workspace's data any more (or never was)."""

    node: str
    workspace_id: str
    move_id: str
    why: str


def stale_copies(records: list[MoveRecord]) -> list[StaleCopy]:
    """The copies the moves in ``records`` leave behind, by node then workspace (``records``: each
    the newest move naming the node that keeps the copy, as
    :meth:`~gateway.control.moves.Moves.leaving_copies` returns them)."""
    found = []
    for r in records:
        if r.state in OLD_COPY_KEPT:
            why = f"old copy: the workspace moved to {r.target}; `almanac workspace move --finish` deletes it"
            found.append(StaleCopy(r.source, r.workspace_id, r.id, why))
        elif r.state == "called_off":
            why = f"unused copy of a move called off (from {r.source}); that node removes it by itself"
            found.append(StaleCopy(r.target, r.workspace_id, r.id, why))
    return sorted(found, key=lambda s: (s.node, s.workspace_id))


def finish_problem(last: MoveRecord | None, placement: Placement | None) -> str | None:
    """Why the workspace's last move cannot be finished (its old copy deleted) now, or None.

    The old copy goes only when the placement names the target and no move is under way: then the
    target's copy is the workspace's data, and the source's is not."""
    if last is None:
        return "this workspace was never moved; there is nothing to finish"
    if last.state in UNDER_WAY:
        return (
            f"its move to {last.target} is still under way ({last.state}); wait for it to end, or for "
            "its deadline to pass (it is then called off)"
        )
    if last.state in ("called_off", "discarded"):
        return (
            f"its last move (to {last.target}) was called off before the switch: the workspace stayed on "
            f"{last.source}, whose copy is its data; there is nothing to finish"
        )
    if last.state == "cleaned":
        return (
            f"its last move (to {last.target}) is complete: the old copy on {last.source} is already deleted"
        )
    if placement is None or placement.node != last.target or placement.moving_to is not None:
        where = "nowhere" if placement is None else placement.node
        return (
            f"the control plane places the workspace on {where}, not on {last.target}; the copy on "
            f"{last.source} is kept"
        )
    return None


def describe(record: MoveRecord) -> str:
    """One line for ``--status``: what the move did and what, if anything, is left."""
    left = {
        "draining": "under way: its files are copied while the source serves it, then a final sync "
        "refuses it everywhere until the switch (or its deadline passes)",
        "copied": "under way: checked copy on the target, not yet switched",
        "flipped": "switched; the target has not served it yet and the old copy is kept: run --finish",
        "served": "switched and served by the target; the old copy is kept: run --finish",
        "cleaned": "complete",
        "called_off": "called off: the workspace stayed on the source",
        "discarded": "called off: the workspace stayed on the source; the target's copy is removed",
    }[record.state]
    note = f" ({record.note})" if record.note else ""
    if record.sync_began_at is not None and record.sync_ended_at is not None:
        note += f" (refused for {record.sync_ended_at - record.sync_began_at:.2f} s by its final sync)"
    return f"{record.source} -> {record.target}\t{record.state}\t{left}{note}"


def latest_touching(records: list[MoveRecord], node: str) -> MoveRecord | None:
    """The newest of ``records`` (oldest first) that names ``node`` as its source or its target: the
    move that governs what node's folder of the workspace is (an earlier one is superseded)."""
    return next((r for r in reversed(records) if node in (r.source, r.target)), None)


def stale_copy_problem(records: list[MoveRecord], placement: Placement | None, here: str) -> str | None:
    """Why node ``here`` must keep its folder of the workspace whose moves are ``records`` (oldest
    first), or None when that folder is a stale copy it may delete: the old copy of a move whose
    copy has since been served (by its target, or after a later move elsewhere), or the unused copy
    of a move called off — judged by the newest move that names this node (every move counts, not
    only the workspace's last), with the placement elsewhere."""
    if placement is None:
        return "the control plane places this workspace nowhere; its folder stays"
    if placement.node == here:
        return "the control plane still places this workspace here; its folder stays"
    if placement.moving_to == here:
        return "a move of this workspace to this node is under way; its folder stays"
    governing = latest_touching(records, here)
    if governing is None:
        return "no move of this workspace names this node; its folder stays"
    later = records[records.index(governing) + 1 :]
    served_since = any(r.state in ("served", "cleaned") for r in later)
    if governing.source == here and (
        governing.state in ("served", "cleaned") or (governing.state == "flipped" and served_since)
    ):
        return None
    if governing.target == here and governing.state in ("called_off", "discarded"):
        return None
    return (
        f"its last move naming this node ({governing.source} -> {governing.target}, {governing.state}) "
        "does not make this node's copy stale; its folder stays"
    )


def old_copies(records: list[MoveRecord], placement: Placement | None) -> list[MoveRecord]:
    """The moves (newest first) whose old copy on their source is still kept and is not the
    workspace's data: switched (``flipped`` or ``served``), the newest move naming that source, and
    the workspace placed elsewhere with no move under way — what ``--finish`` deletes."""
    if placement is None or placement.moving_to is not None:
        return []
    return [
        r
        for r in reversed(records)
        if r.state in OLD_COPY_KEPT and r.source != placement.node and latest_touching(records, r.source) is r
    ]


def nodes_keeping_copies(records: list[MoveRecord], placed: str | None) -> list[str]:
    """The nodes besides ``placed`` that may keep a folder of the workspace whose moves are
    ``records`` (in any order) — what an account erase must have deleted before its rows go. Every
    record counts, not only the last (an old copy kept by an earlier move outlives a later one): the
    source of a move switched but not cleaned, the target of one called off whose copy is not yet
    discarded, and both ends of one under way."""
    found: set[str] = set()
    for r in records:
        if r.state in OLD_COPY_KEPT:
            found.add(r.source)
        elif r.state == "called_off":
            found.add(r.target)
        elif r.state in UNDER_WAY:
            found.update((r.source, r.target))
    found.discard(placed or "")
    return sorted(found)


def erase_copy_problem(being_erased: bool, placement: Placement | None, here: str) -> str | None:
    """Why node ``here`` must not erase its copy of a workspace for an account erase, or None: only
    the copies of an owner being erased (locked out), and never the placed one (that one goes with
    its engine, erased by the node the workspace is placed on) nor one a move under way brings here."""
    if not being_erased:
        return "this workspace's account is not being erased; its folder stays"
    if placement is not None and placement.node == here:
        return "the control plane places this workspace here: it is erased with its engine, not as a copy"
    if placement is not None and placement.moving_to == here:
        return "a move of this workspace to this node is under way; its folder stays"
    return None
