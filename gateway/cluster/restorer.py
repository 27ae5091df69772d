"""``almanac workspace restore WS --from DIR --to NODE`` (issue 15): put a workspace whose node was
declared lost (``almanac node lost``) back in service from a backup folder — a copy of its folder from
a volume snapshot or an object-storage sync (deploy/SCALING.md, "Backups") — on another node.

The steps mirror a move (:mod:`gateway.cluster.mover`), with the backup in place of the lost source:

1. the placement is marked as moving from the lost node to the target (a move record, with the
   drain's deadline, so every node answers ``workspace_moving`` meanwhile and two restores never
   run at once);
2. the target gets an empty staging folder, then every file of the backup, each call signed over its
   body (:mod:`gateway.cluster.restores`);
3. the target checks that its staging folder holds exactly the backup's manifest (size and SHA-256
   of every file), moves it into place and lists what it now has; the command compares that list
   with the backup's, file by file, or the restore is called off (the workspace stays lost, the
   target's copy is removed);
4. the placement flips to the target; the target starts the workspace's engine on the copy.

The record of the restore is a move from the lost node to the target, noted "restored from the
backup …": the lost node's own copy counts as an old copy (``almanac node stale`` lists it; should
the node come back, ``--finish`` deletes it). Audited as ``workspace.restore``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gateway.cluster import manifest
from gateway.cluster.mover import (
    MoveConfig,
    MovePlane,
    MoveReport,
    NodeCalls,
    Renewer,
    call_off_lapsed,
    no_pause,
    open_on,
)
from gateway.cluster.placement import is_live
from gateway.control.plane import Audits
from gateway.errors import BadRequest, GatewayError, MoveFailed


class _Audited(MovePlane, Audits, Protocol):
    pass


def backup_manifest(backup: Path) -> tuple[manifest.Entry, ...]:
    """The files of a backup folder, refused (nothing changes) unless it is a folder holding files."""
    if not backup.is_dir():
        raise BadRequest(f"{backup} is not a folder; give the backup copy of the workspace's folder")
    found = manifest.manifest(backup)
    if not found:
        raise BadRequest(f"{backup} holds no files: it is not a backup of a workspace (nothing changed)")
    return found


def restore(
    store: _Audited,
    owner_id: str,
    workspace_id: str,
    backup: Path,
    target_name: str,
    config: MoveConfig,
    *,
    clock: Callable[[], float] = time.time,
    say: Callable[[str], None] = lambda line: None,
    pause: Callable[[str], None] = no_pause,
) -> MoveReport:
    nodes = {n.name: n for n in store.nodes()}
    placement = store.placement(workspace_id)
    if placement is None:
        raise BadRequest(
            f"workspace {workspace_id} was never placed on a node: nothing of it is lost (nothing changed)"
        )
    lost = nodes.get(placement.node)
    if lost is None or not lost.lost:
        raise BadRequest(
            f"workspace {workspace_id} is on node {placement.node!r}, which is not declared lost: its data "
            "is there (`almanac workspace move` moves it; `almanac node lost` declares a node's disk gone); "
            "nothing changed"
        )
    target = nodes.get(target_name)
    if target is None:
        raise BadRequest(f"no node named {target_name!r}; the nodes are: {', '.join(sorted(nodes))}")
    if target.lost or not is_live(target, now=clock(), heartbeat_timeout=config.heartbeat_timeout):
        raise BadRequest(
            f"node {target_name!r} is {'declared lost' if target.lost else 'not heard from'}; restore the "
            "workspace to a live node (nothing changed)"
        )
    entries = backup_manifest(backup)
    size = sum(e.size for e in entries)
    link = NodeCalls(config.secret, clock)
    try:
        if placement.moving_to is not None:
            call_off_lapsed(store, link, placement, nodes, clock=clock, say=say)
        move = store.begin_move(workspace_id, lost.name, target.name, now=clock(), timeout=config.timeout)
        note = f"restored from the backup {backup} ({len(entries)} files)"
        say(f"restoring workspace {workspace_id} on {target.name}: {len(entries)} files ({size} bytes)")
        flipped = settled = False
        try:
            with Renewer(store, move.id, config.timeout, clock):
                link.call(target, "POST", workspace_id, "restore/begin")
                for entry in entries:
                    raw = (backup / entry.path).read_bytes()
                    link.send(
                        target,
                        "PUT",
                        workspace_id,
                        f"restore/files/{entry.path}",
                        raw,
                        "application/octet-stream",
                    )
                pause("sent")
                answer = link.call(target, "POST", workspace_id, "restore/settle", manifest.to_json(entries))
                settled = True
                problems = manifest.differences(entries, manifest.from_json(answer["manifest"]))
                if problems:
                    raise MoveFailed("the restored copy differs from the backup: " + "; ".join(problems[:10]))
                store.advance_move(move.id, now=clock(), timeout=config.timeout, state="copied")
                say(f"verified {len(entries)} files by SHA-256; switching the workspace to {target.name}")
                store.finish_move(move, now=clock(), lease=config.lease)
                flipped = True
        except BaseException as exc:
            if not flipped:
                reason = exc.message if isinstance(exc, GatewayError) else f"the command stopped ({exc!r})"
                if store.abort_move(move, now=clock(), reason=f"restore: {reason}"):
                    with contextlib.suppress(MoveFailed):  # else the target removes it by itself
                        if settled:
                            link.call(target, "DELETE", workspace_id, "")
                        store.record_move(move.id, "discarded", now=clock(), note=f"restore: {reason}")
            raise
        open_on(link, target, workspace_id, clock=clock)
        store.record_move(move.id, "served", now=clock(), note=note)
    finally:
        link.close()
    store.audit(
        "workspace.restore",
        owner_id=owner_id,
        workspace_id=workspace_id,
        detail={"lost_node": lost.name, "to": target.name, "backup": str(backup), "files": len(entries)},
    )
    return MoveReport(workspace_id, lost.name, target.name, len(entries), size)
