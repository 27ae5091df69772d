"""``almanac node …``: the nodes that share a control plane (deploy/SCALING.md)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors
from gateway.cluster.journal import stale_copies
from gateway.cluster.placement import is_live


@click.group()
def node() -> None:
    """List the nodes sharing the control plane; drain one before removing it."""


@node.command("list")
@data_dir_option
@config_option
@reports_errors
def node_list(data_dir: Path | None, config_file: Path | None) -> None:
    """List the nodes: name, advertise URL, seconds since its last heartbeat, live or down (not heard
    from within placement_lease), draining or accepting new workspaces, workspaces placed on it."""
    settings = make_settings(config_file, data_dir=data_dir)
    with control_plane(config_file, data_dir) as store:
        nodes = store.nodes()
    now = time.time()
    for n in nodes:
        live = is_live(n, now=now, heartbeat_timeout=settings.placement_lease)
        click.echo(
            f"{n.name}\t{n.advertise_url}\t{max(0.0, now - n.heartbeat_at):.0f}s\t"
            f"{'live' if live else 'down'}\t{'draining' if n.draining else 'accepting'}\t{n.workspaces}"
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
        store.set_draining(name, not undo)
        (found,) = [n for n in store.nodes() if n.name == name]
    state = "accepts new workspaces again" if undo else "is draining: no new workspaces are placed on it"
    click.echo(f"node {name!r} {state}; {found.workspaces} workspace(s) placed on it", err=True)


@node.command("stale")
@data_dir_option
@config_option
@reports_errors
def node_stale(data_dir: Path | None, config_file: Path | None) -> None:
    """List the folders nodes keep that are no longer (or never were) a workspace's data, left by
    moves: node, workspace, move, why (and what removes it)."""
    with control_plane(config_file, data_dir) as store:
        records = store.moves_leaving_copies()
    for copy in stale_copies(records):
        click.echo(f"{copy.node}\t{copy.workspace_id}\t{copy.move_id}\t{copy.why}")
