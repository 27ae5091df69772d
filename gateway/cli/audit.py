"""``almanac audit``: security events."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gateway.cli.common import config_option, control_plane, data_dir_option, reports_errors


@click.command()
@click.option("--owner", "email", default=None, help="Only this owner's events.")
@click.option("--limit", type=int, default=50, show_default=True, help="How many of the newest events.")
@data_dir_option
@config_option
@reports_errors
def audit(email: str | None, limit: int, data_dir: Path | None, config_file: Path | None) -> None:
    """Show security events (token create/revoke, denials), newest first, as JSON lines."""
    with control_plane(config_file, data_dir) as store:
        owner_id = store.owners.by_email(email).id if email else None
        for event in store.audit_log.events(owner_id=owner_id, limit=limit):
            click.echo(json.dumps(event.__dict__, sort_keys=True))
