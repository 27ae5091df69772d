"""``almanac workspace restore WS --from SOURCE --to NODE`` (``run:scale-out``): put a workspace whose node
was declared lost (``almanac node lost``) back in service on another node, from a backup folder — a
copy of its folder from a volume snapshot or an object-storage sync (deploy/SCALING.md, "Backups")
— or from the owner's export zip (:mod:`gateway.cluster.backups` checks either before anything is
sent).

The steps mirror a move (:mod:`gateway.cluster.move.driver`), with the backup in place of the lost source:

1. the placement is marked as moving from the lost node to the target (a move record, with the
   drain's deadline, so every node answers ``workspace_restoring`` meanwhile and two restores never
   run at once);
2. the target gets an empty staging folder, then every file of the backup, streamed in bounded
   chunks, hashed as it goes, its declared SHA-256 signed (:mod:`gateway.cluster.restore.endpoints`);
3. the target checks that its staging folder holds exactly the backup's manifest (size and SHA-256
   of every file), moves it into place and lists what it now has; the command compares that list
   with the backup's, file by file, or the restore is called off (the workspace stays lost, the
   target's copy is removed);
4. the placement flips to the target; the target starts the workspace's engine on the copy.

A command that dies half-way pushes the deadline no further: the restore lapses, every live node
calls it off at its next heartbeat and the workspace is lost again (the target removes what it
received); ``--abandon`` (:func:`abandon`) does so at once. Running the same restore again redoes
it, or finishes it once the workspace was switched (:func:`restore`).

The record of the restore is a move from the lost node to the target, noted "restored from the
backup …" (or "from the owner's export …"): the lost node's own copy counts as an old copy
(``almanac node stale`` lists it; should the node come back, ``--finish`` deletes it). Audited as
``workspace.restore``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from gateway.cluster import backups, manifest
from gateway.cluster.move.driver import (
    MoveConfig,
    MoveReport,
    NodeCalls,
    Renewer,
    call_off_lapsed,
    no_pause,
    open_on,
)
from gateway.cluster.placement import is_live
from gateway.control.records import MoveRecord, Node, Placement
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, GatewayError, MoveFailed


def restore(
    store: ControlPlane,
    owner_id: str,
    workspace_id: str,
    backup: Path,
    target_name: str,
    config: MoveConfig,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None] = lambda line: None,
    pause: Callable[[str], None] = no_pause,
) -> MoveReport:
    nodes = {n.name: n for n in store.nodes.all()}
    placement = store.nodes.placement(workspace_id)
    if placement is None:
        raise BadRequest(
            f"workspace {workspace_id} was never placed on a node: nothing of it is lost (nothing changed)"
        )
    target = nodes.get(target_name)
    if target is None:
        raise BadRequest(f"no node named {target_name!r}; the nodes are: {', '.join(sorted(nodes))}")
    done = _restored_already(store, placement, nodes, target_name)
    if done is not None:
        return _finish_restored(store, done, target, backup, config, clock=clock, say=say)
    lost = nodes.get(placement.node)
    if lost is None or not lost.lost:
        raise BadRequest(
            f"workspace {workspace_id} is on node {placement.node!r}, which is not declared lost: its data "
            "is there (`almanac workspace move` moves it; `almanac node lost` declares a node's disk gone); "
            "nothing changed"
        )
    if target.lost or not is_live(target, now=clock(), heartbeat_timeout=config.heartbeat_timeout):
        raise BadRequest(
            f"node {target_name!r} is {'declared lost' if target.lost else 'not heard from'}; restore the "
            "workspace to a live node (nothing changed)"
        )
    with backups.open_backup(backup, workspace_id) as source:  # checked: nothing is sent otherwise
        return _restore(store, owner_id, workspace_id, source, lost, target, placement, nodes, config,
                        clock=clock, say=say, pause=pause)  # fmt: skip


def _restore(
    store: ControlPlane,
    owner_id: str,
    workspace_id: str,
    source: backups.Backup,
    lost: Node,
    target: Node,
    placement: Placement,
    nodes: dict[str, Node],
    config: MoveConfig,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
    pause: Callable[[str], None],
) -> MoveReport:
    entries, backup = source.entries, source.where
    size = sum(e.size for e in entries)
    link = NodeCalls(config.secret, clock)
    try:
        if placement.moving_to is not None:
            _call_off_lapsed_restore(store, link, placement, nodes, clock=clock, say=say)
        _discard_earlier(store, link, workspace_id, target, clock=clock)
        move = store.moves.begin(workspace_id, lost.name, target.name, now=clock(), timeout=config.timeout)
        kind = "the owner's export" if source.kind == "export" else "the backup"
        note = f"{RESTORED_NOTE}{kind} {_named(backup)} ({len(entries)} files)"
        store.moves.record(move.id, "draining", now=clock(), note=note)  # a run again knows it by it
        say(f"restoring workspace {workspace_id} on {target.name}: {len(entries)} files ({size} bytes)")
        flipped = settled = False
        try:
            with Renewer(store, move.id, config.timeout, clock):
                link.call(target, "POST", workspace_id, "restore/begin")
                for sent, entry in enumerate(entries):
                    if sent == len(entries) // 2:
                        pause("half-sent")
                    with source.open(entry) as stream:
                        link.stream(
                            target,
                            "PUT",
                            workspace_id,
                            f"restore/files/{entry.path}",
                            backups.Chunks(stream, entry),
                        )
                pause("sent")
                answer = link.call(target, "POST", workspace_id, "restore/settle", manifest.to_json(entries))
                settled = True
                pause("settled")
                problems = manifest.differences(entries, manifest.from_json(answer["manifest"]))
                if problems:
                    raise MoveFailed("the restored copy differs from the backup: " + "; ".join(problems[:10]))
                store.moves.advance(move.id, now=clock(), timeout=config.timeout, state="copied")
                say(f"verified {len(entries)} files by SHA-256; switching the workspace to {target.name}")
                store.moves.finish(move, now=clock(), lease=config.lease)
                flipped = True
                pause("flipped")
        except BaseException as exc:
            if not flipped:
                reason = exc.message if isinstance(exc, GatewayError) else f"the command stopped ({exc!r})"
                if store.moves.abort(move, now=clock(), reason=f"restore: {reason}"):
                    with contextlib.suppress(MoveFailed):  # else the target removes it by itself
                        if settled:
                            link.call(target, "DELETE", workspace_id, "")
                        store.moves.record(move.id, "discarded", now=clock(), note=f"restore: {reason}")
            raise
        open_on(link, target, workspace_id, clock=clock)
        store.moves.record(move.id, "served", now=clock(), note=note)
    finally:
        link.close()
    store.audit_log.record(
        "workspace.restore",
        owner_id=owner_id,
        workspace_id=workspace_id,
        detail={"lost_node": lost.name, "to": target.name, "backup": str(backup), "files": len(entries)},
    )
    return MoveReport(workspace_id, lost.name, target.name, len(entries), size)


#: What a restore's record says (``--status``) before the backup's name.
RESTORED_NOTE = "restored from "


def _named(backup: Path) -> str:
    """How a restore's record names its backup: the absolute path, whatever folder the command ran in."""
    return str(backup.absolute())


def _restored_already(
    store: ControlPlane, placement: Placement, nodes: dict[str, Node], target: str
) -> MoveRecord | None:
    """The restore that already put the workspace on ``target`` (its last move: from a node declared
    lost, switched), or None: running the same restore again finishes that one, or says it is done."""
    if placement.node != target or placement.moving_to is not None:
        return None
    moves = store.moves.of_workspace(placement.workspace_id)
    last = moves[-1] if moves else None
    if last is None or last.target != target or last.state not in ("flipped", "served", "cleaned"):
        return None
    source = nodes.get(last.source)
    if source is None or not source.lost or not last.note.startswith(RESTORED_NOTE):
        return None
    return last


def _finish_restored(
    store: ControlPlane,
    done: MoveRecord,
    target: Node,
    backup: Path,
    config: MoveConfig,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> MoveReport:
    """The same restore, run again once the workspace is switched: the target serves it (if the
    command that switched it stopped before), and nothing else changes. Another backup named is
    refused: the workspace already serves the one restored (and whatever was written since)."""
    if f" {_named(backup)} (" not in done.note:
        raise BadRequest(
            f"workspace {done.workspace_id} was already restored on node {target.name} "
            f"({done.note.split(' (')[0]}); it is served there, with whatever was written since, so it is "
            f"not restored again from {backup} (nothing changed)"
        )
    if done.state == "flipped":
        say(f"workspace {done.workspace_id} was switched to {target.name} by an earlier run; opening it")
        link = NodeCalls(config.secret, clock)
        try:
            open_on(link, target, done.workspace_id, clock=clock)
        finally:
            link.close()
        store.moves.record(done.id, "served", now=clock(), note=done.note)
    else:
        say(f"workspace {done.workspace_id} is already restored on {target.name}; nothing changed")
    return MoveReport(done.workspace_id, done.source, target.name, 0, 0)


def _call_off_lapsed_restore(
    store: ControlPlane,
    link: NodeCalls,
    placement: Placement,
    nodes: dict[str, Node],
    *,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> None:
    """An earlier restore is marked: refused while its command may still be at work (its deadline
    ahead), else called off here (every live node would do so at its next heartbeat anyway)."""
    deadline = placement.move_deadline
    if deadline is not None and deadline > clock():
        raise BadRequest(
            f"another restore of workspace {placement.workspace_id} to {placement.moving_to} is under way "
            f"(called off at the latest {max(0.0, deadline - clock()):.0f} s from now, unless its command "
            "advances it); wait and run the restore again, or abandon that one: `almanac workspace restore "
            "NAME --owner EMAIL --abandon` (nothing changed)"
        )
    call_off_lapsed(store, link, placement, nodes, clock=clock, say=say)


def _discard_earlier(
    store: ControlPlane, link: NodeCalls, workspace_id: str, target: Node, *, clock: Callable[[], float]
) -> None:
    """An earlier restore to ``target`` that was called off may have left what it sent there (the
    target removes it at its next heartbeat): removed now, so this restore begins on a clean slate."""
    moves = store.moves.of_workspace(workspace_id)
    last = moves[-1] if moves else None
    if last is not None and last.target == target.name and last.state == "called_off":
        with contextlib.suppress(MoveFailed):  # refused: the restore's begin says why
            link.call(target, "DELETE", workspace_id, "")
            store.moves.record(last.id, "discarded", now=clock(), note=last.note)


def abandon(
    store: ControlPlane,
    owner_id: str,
    workspace_id: str,
    config: MoveConfig,
    *,
    clock: Callable[[], float],
    say: Callable[[str], None] = lambda line: None,
) -> MoveRecord:
    """Abandon the restore of ``workspace_id`` under way (its command killed, or still running —
    its next step then finds it called off and stops): the workspace is lost again, and the target
    removes what it received (now, or at its next heartbeat if it cannot be reached). Refused
    (nothing changed) when no restore of it is under way."""
    placement = store.nodes.placement(workspace_id)
    nodes = {n.name: n for n in store.nodes.all()}
    source = None if placement is None else nodes.get(placement.node)
    if placement is None or placement.moving_to is None or source is None or not source.lost:
        raise BadRequest(
            f"no restore of workspace {workspace_id} is under way; nothing to abandon (nothing changed)"
        )
    move = None if placement.move_id is None else store.moves.by_id(placement.move_id)
    if move is None or not store.moves.abort(move, now=clock(), reason="restore: abandoned by the operator"):
        raise BadRequest(f"the restore of workspace {workspace_id} ended meanwhile; nothing to abandon")
    say(f"abandoned the restore of workspace {workspace_id} to {move.target}; it is lost again")
    target = nodes.get(move.target)
    if target is not None:
        link = NodeCalls(config.secret, clock)
        try:
            link.call(target, "DELETE", workspace_id, "")
            store.moves.record(move.id, "discarded", now=clock(), note="restore: abandoned by the operator")
            say(f"{target.name} removed what it had received")
        except MoveFailed as exc:
            say(f"{exc.message}; {target.name} removes what it received at its next heartbeat")
        finally:
            link.close()
    store.audit_log.record(
        "workspace.restore.abandon",
        owner_id=owner_id,
        workspace_id=workspace_id,
        detail={"lost_node": move.source, "to": move.target, "move": move.id},
    )
    found = store.moves.by_id(move.id)
    assert found is not None
    return found
