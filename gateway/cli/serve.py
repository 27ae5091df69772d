"""``almanac serve``: the gateway in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli.common import config_option, data_dir_option, make_settings, reports_errors
from gateway.serve import run


@click.command()
@click.option("--host", default=None, help="Interface to listen on (default 127.0.0.1; 0.0.0.0 for all).")
@click.option("--port", type=int, default=None, help="Port to listen on (default 8080; 0 picks a free one).")
@click.option(
    "--database-url",
    default=None,
    help="Keep the control plane in PostgreSQL (postgresql://…) instead of <data-dir>/control.db. "
    "Default $ALMANAC_DATABASE_URL; prefer it to this flag, which other users can see in ps.",
)
@click.option("--node", default=None, help="Serve as this node of several (a name like a host name).")
@click.option(
    "--advertise", "advertise_url", default=None, help="With --node: the http(s) URL other nodes reach it at."
)
@data_dir_option
@config_option
@reports_errors
def serve(
    host: str | None,
    port: int | None,
    database_url: str | None,
    node: str | None,
    advertise_url: str | None,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Start the gateway: MCP at /mcp, engines started on demand. Prints the URL.

    Creates the data directory and its control database on first start."""
    settings = make_settings(
        config_file,
        host=host,
        port=port,
        data_dir=data_dir,
        database_url=database_url,
        node=node,
        advertise_url=advertise_url,
    )
    run(settings)
