"""``almanac node …``: the nodes that share a control plane (deploy/SCALING.md)."""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors
from gateway.cluster.journal import stale_copies
from gateway.cluster.placement import is_live


@click.group()
def node() -> None:
    """List the nodes sharing the control plane; drain one before removing it, or declare one lost
    for good."""


@node.command("list")
@data_dir_option
@config_option
@reports_errors
def node_list(data_dir: Path | None, config_file: Path | None) -> None:
    """List the nodes: name, advertise URL, seconds since its last heartbeat, live or down (not heard
    from within placement_lease) or lost (declared lost: it serves nothing) or volume-mismatch
    (running on a data directory that is not its own: it serves nothing), draining or accepting new
    workspaces, workspaces placed on it."""
    settings = make_settings(config_file, data_dir=data_dir)
    with control_plane(config_file, data_dir) as store:
        nodes = store.nodes.all()
        now = store.database_time()  # heartbeats are judged by the database's clock, not this host's
    for n in nodes:
        live = is_live(n, now=now, heartbeat_timeout=settings.placement_lease)
        state = "lost" if n.lost else "volume-mismatch" if n.misplaced else "live" if live else "down"
        click.echo(
            f"{n.name}\t{n.advertise_url}\t{max(0.0, now - n.heartbeat_at):.0f}s\t"
            f"{state}\t{'draining' if n.draining else 'accepting'}\t{n.workspaces}"
        )


@node.command("drain")
@click.argument("name")
@click.option("--undo", is_flag=True, help="Let the node take new workspaces again.")
@data_dir_option
@config_option
@reports_errors
def node_drain(name: str, undo: bool, data_dir: Path | None, config_file: Path | None) -> None:
    """Stop placing new workspaces on a node (kept across its restarts). The workspaces already on
    it stay and are served there until each is moved with `almanac workspace move`."""
    with control_plane(config_file, data_dir) as store:
        store.nodes.set_draining(name, not undo)
        (found,) = [n for n in store.nodes.all() if n.name == name]
    state = "accepts new workspaces again" if undo else "is draining: no new workspaces are placed on it"
    click.echo(f"node {name!r} {state}; {found.workspaces} workspace(s) placed on it", err=True)


@node.command("stale")
@data_dir_option
@config_option
@reports_errors
def node_stale(data_dir: Path | None, config_file: Path | None) -> None:
    """List the folders nodes keep that are no longer (or never were) a workspace's data, left by
    moves (every move, not only each workspace's last) and restores: node, workspace, move, why
    (and what removes it)."""
    with control_plane(config_file, data_dir) as store:
        records = store.moves.leaving_copies()
        lost = {n.name for n in store.nodes.all() if n.lost}
    for copy in stale_copies(records):
        why = (
            f"on a node declared lost: nothing to delete while it is lost; should it come back "
            f"(`almanac node lost {copy.node} --undo --confirm`), {copy.why}"
            if copy.node in lost
            else copy.why
        )
        click.echo(f"{copy.node}\t{copy.workspace_id}\t{copy.move_id}\t{why}")


@node.command("lost")
@click.argument("name", required=False)
@click.option("--confirm", is_flag=True, help="Required: you know the node's disk is gone for good.")
@click.option("--force", is_flag=True, help="Even though the node heartbeated within placement_lease.")
@click.option(
    "--undo",
    is_flag=True,
    help="Its disk came back after all: it serves the workspaces still placed on it again.",
)
@data_dir_option
@config_option
@reports_errors
def node_lost(
    name: str | None, confirm: bool, force: bool, undo: bool, data_dir: Path | None, config_file: Path | None
) -> None:
    """Without NAME: list the workspaces every node refuses as lost — node, workspace id, owner,
    workspace, why: "declared lost", or "volume not its own" (the node runs on a data directory whose
    volume identity is not the one recorded at its first start: an empty or swapped volume; they
    answer 503 volume_mismatch until it is started again on its own volume).

    With NAME: declare a node lost for good (its disk is gone): it serves nothing from now on,
    whatever its heartbeat says, and takes nothing new; moves from or to it are called off. Its
    workspaces are not re-opened empty elsewhere: each answers 410 workspace_lost until restored from
    a backup with `almanac workspace restore`. An account erase no longer waits for copies on it.
    Refused for a node that heartbeated within placement_lease, unless --force. Audited (node.lost)."""
    if name is None:
        if confirm or force or undo:
            raise click.UsageError("--confirm, --force and --undo need the NODE's name (nothing changed)")
        with control_plane(config_file, data_dir) as store:
            found = store.lost.workspaces()
        for ws in found:
            click.echo(f"{ws.node}\t{ws.workspace_id}\t{ws.owner_email}\t{ws.workspace}\t{ws.why}")
        return
    if not confirm:
        what = (
            "lets the node serve the workspaces still placed on it again, from its disk"
            if undo
            else "declares the node's disk gone for good: its workspaces stop being served until "
            "each is restored from a backup"
        )
        raise click.UsageError(f"this {what}; add --confirm to go ahead (nothing changed)")
    settings = make_settings(config_file, data_dir=data_dir)
    with control_plane(config_file, data_dir) as store:
        if undo:
            placed = store.lost.found(name)
            click.echo(
                f"node {name!r} is no longer lost: it serves the {placed} workspace(s) still placed on it "
                "(from its disk) once it heartbeats",
                err=True,
            )
            return
        lost = store.lost.mark(
            name, now=store.database_time(), heartbeat_timeout=settings.placement_lease, force=force
        )
    if lost.already:
        click.echo(f"node {name!r} was already declared lost; nothing changed", err=True)
        return
    for move in lost.called_off:
        click.echo(
            f"called off the move of workspace {move.workspace_id} ({move.source} -> {move.target})", err=True
        )
    click.echo(
        f"node {name!r} is declared lost: its {lost.workspaces} workspace(s) answer workspace_lost until "
        "each is restored from a backup "
        "(`almanac workspace restore NAME --owner EMAIL --from DIR --to NODE`)",
        err=True,
    )
