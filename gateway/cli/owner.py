"""``almanac owner …``: accounts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gateway import layout
from gateway.auth.passwords import hash_password
from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors


@click.group()
def owner() -> None:
    """Manage owners (accounts)."""


@owner.command("create")
@click.argument("email")
@data_dir_option
@config_option
@reports_errors
def owner_create(email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Create an owner with a 'default' workspace. A password, if any, is read from stdin.

    The first owner may be created before the service ever started: this sets up the data
    directory (and says so)."""
    password = None
    if not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n") or None
    where = make_settings(config_file, data_dir=data_dir).data_dir
    fresh = not layout.control_db(where).exists()
    with control_plane(config_file, data_dir, create=True) as store:
        created, workspace = store.create_owner(email, hash_password(password) if password else None)
    if fresh:
        click.echo(f"set up a new data directory at {where}", err=True)
    click.echo(f"created owner {created.email} ({created.id}) with workspace {workspace.name!r}", err=True)
