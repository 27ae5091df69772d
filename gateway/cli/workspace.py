"""``almanac workspace …``: an owner's workspaces and what they hold."""

from __future__ import annotations

from pathlib import Path

import click

from gateway import layout
from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors
from gateway.cluster.mover import move
from gateway.control.store import DEFAULT_WORKSPACE
from gateway.control.usage import measure
from gateway.errors import ConfigError


@click.group()
def workspace() -> None:
    """Manage an owner's workspaces."""


@workspace.command("create")
@click.argument("name")
@click.option("--owner", "email", required=True, help="The owner's email.")
@data_dir_option
@config_option
@reports_errors
def workspace_create(name: str, email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Create another workspace for an owner."""
    with control_plane(config_file, data_dir) as store:
        created = store.create_workspace(store.owner_by_email(email).id, name)
    click.echo(f"created workspace {created.name!r} ({created.id})", err=True)


@workspace.command("list")
@click.option("--owner", "email", required=True, help="The owner's email.")
@data_dir_option
@config_option
@reports_errors
def workspace_list(email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """List an owner's workspaces (id, name, created, folder)."""
    root = make_settings(config_file, data_dir=data_dir).data_dir
    with control_plane(config_file, data_dir) as store:
        for ws in store.workspaces(store.owner_by_email(email).id):
            click.echo(f"{ws.id}\t{ws.name}\t{ws.created_at}\t{layout.workspace_dir(root, ws.id)}")


@workspace.command("usage")
@click.argument("name", default=DEFAULT_WORKSPACE)
@click.option("--owner", "email", required=True, help="The owner's email.")
@data_dir_option
@config_option
@reports_errors
def workspace_usage(name: str, email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Show what a workspace holds: Markdown files by kind, bytes of store and of index."""
    root = make_settings(config_file, data_dir=data_dir).data_dir
    with control_plane(config_file, data_dir) as store:
        ws = store.workspace_by_name(store.owner_by_email(email).id, name)
    folder = layout.workspace_dir(root, ws.id)
    click.echo(f"workspace\t{ws.name}\nfolder\t{folder}")
    for label, value in measure(folder).rows():
        click.echo(f"{label}\t{value}")


@workspace.command("move")
@click.argument("name")
@click.option("--owner", "email", required=True, help="The owner's email.")
@click.option("--to", "target", required=True, help="The node to move the workspace to.")
@data_dir_option
@config_option
@reports_errors
def workspace_move(
    name: str, email: str, target: str, data_dir: Path | None, config_file: Path | None
) -> None:
    """Move a workspace to another node: drain it, copy its folder node to node, verify every
    file's SHA-256, switch it over, and delete the old copy once the new node serves it.

    Needs the shared control plane (database_url) and the nodes' cluster_secret."""
    settings = make_settings(config_file, data_dir=data_dir)
    if settings.database_url is None or settings.cluster_secret is None:
        raise ConfigError(
            "moving a workspace needs the nodes' control plane and secret: set ALMANAC_DATABASE_URL "
            "and ALMANAC_CLUSTER_SECRET as on the nodes"
        )
    with control_plane(config_file, data_dir) as store:
        ws = store.workspace_by_name(store.owner_by_email(email).id, name)
        report = move(
            store,
            ws.id,
            target,
            secret=settings.cluster_secret,
            lease=settings.placement_lease,
            heartbeat_timeout=settings.placement_lease,
            say=lambda line: click.echo(line, err=True),
        )
    click.echo(f"moved workspace {ws.name!r} ({ws.id}) to {report.target}: {report.files} files", err=True)
