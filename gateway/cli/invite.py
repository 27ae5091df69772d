"""``almanac invite …``: single-use codes for web sign-up when the setting ``signup`` is ``invite``."""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli.common import config_option, control_plane, data_dir_option, reports_errors


@click.group()
def invite() -> None:
    """Invite codes, for sign-up on the web when the setting `signup` is `invite`."""


@invite.command("create")
@click.option("--note", default=None, help="Who the code is for (kept in the audit log).")
@data_dir_option
@config_option
@reports_errors
def invite_create(note: str | None, data_dir: Path | None, config_file: Path | None) -> None:
    """Create a single-use invite code; it is printed once, alone on stdout."""
    with control_plane(config_file, data_dir) as store:
        code = store.accounts.create_invite(note)
    click.echo(code)
    click.echo("give it to the person who signs up at /signup; it works once", err=True)
