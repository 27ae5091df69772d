"""``almanac workspace …``: an owner's workspaces and what they hold."""

from __future__ import annotations

from pathlib import Path

import click

from gateway import layout
from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors
from gateway.control.store import DEFAULT_WORKSPACE
from gateway.control.usage import measure


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
