"""``almanac control …``: the control plane itself (deploy/SCALING.md "From one host to PostgreSQL")."""

from __future__ import annotations

import os
from pathlib import Path

import click

from gateway import layout
from gateway.cli.common import config_option, data_dir_option, make_settings, reports_errors
from gateway.cluster.fencing import SERVE_LOCK, hold_data_dir
from gateway.control.db import redact
from gateway.control.store import ControlPlane
from gateway.control.to_postgres import MigrationRefused, copy_control_plane, mark_moved
from gateway.errors import DataDirError


@click.group()
def control() -> None:
    """The control plane (owners, workspaces, tokens, OAuth grants, audit): move it from SQLite to
    PostgreSQL."""


@control.command("migrate-to-postgres")
@click.option(
    "--database-url",
    default=None,
    help="The empty PostgreSQL database to copy into (postgresql://…). Default $ALMANAC_DATABASE_URL; "
    "prefer it to this flag, which other users can see in ps.",
)
@data_dir_option
@config_option
@reports_errors
def migrate_to_postgres(database_url: str | None, data_dir: Path | None, config_file: Path | None) -> None:
    """Copy this data directory's control plane (control.db) into an empty PostgreSQL database, every
    table in one transaction, checked before it commits: each table's row count and a checksum of its
    rows must be equal on both sides. Prints each table: rows in SQLite, rows in PostgreSQL, checksum.

    Refused, changing nothing, while an `almanac serve` runs on the data directory, when the database
    already holds tables, or when anything differs. Afterwards start `almanac serve` (and every
    command) with database_url on the same data directory; control.db is kept unchanged, and is
    refused from then on, so that nothing serves the old copy."""
    settings = make_settings(config_file, data_dir=data_dir, database_url=database_url)
    url = settings.database_url
    if url is None:
        raise MigrationRefused(
            "give the PostgreSQL database to copy into: --database-url or ALMANAC_DATABASE_URL "
            "(postgresql://USER:PASSWORD@HOST:PORT/DATABASE)"
        )
    sqlite_path = layout.control_db(settings.data_dir)
    ControlPlane.open(sqlite_path, create=False).close()  # present, usable, not moved; newest schema
    try:
        held = hold_data_dir(settings.data_dir)
    except DataDirError as exc:
        if "already running" not in exc.message:
            raise
        raise MigrationRefused(
            f"an `almanac serve` is running on the data directory {settings.data_dir} (it holds "
            f"{settings.data_dir / SERVE_LOCK}); stop it first: its control plane must not change while "
            "it is copied (nothing was changed)"
        ) from None
    try:
        report = copy_control_plane(sqlite_path, url)
        marker = mark_moved(sqlite_path, url)
    finally:
        os.close(held)
    for line in report:
        click.echo(f"{line.table}\t{line.source.rows}\t{line.target.rows}\t{line.target.short}")
    total = sum(line.source.rows for line in report)
    click.echo(
        f"copied {total} rows in {len(report)} tables into {redact(url)}; row counts and checksums "
        f"are equal on both sides. Start `almanac serve` with database_url on {settings.data_dir} "
        f"from now on; {sqlite_path.name} is kept as it was and refused from now on ({marker.name}).",
        err=True,
    )
