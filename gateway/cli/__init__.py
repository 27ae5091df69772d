"""``almanac …`` (``run:cli``): one command line for running and administering Almanac.

One module per command group; :data:`main` collects them. A new group is a module with a click
command or group, added to ``COMMANDS`` below."""

from __future__ import annotations

import click

from gateway.cli.audit import audit
from gateway.cli.bench import bench
from gateway.cli.control import control
from gateway.cli.engine import engine
from gateway.cli.invite import invite
from gateway.cli.node import node
from gateway.cli.owner import owner
from gateway.cli.serve import serve
from gateway.cli.token import token
from gateway.cli.transfer import export, import_
from gateway.cli.workspace import workspace

COMMANDS: tuple[click.Command, ...] = (
    serve,
    owner,
    workspace,
    node,
    control,
    token,
    invite,
    audit,
    engine,
    import_,
    export,
    bench,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="almanac", prog_name="almanac", message="%(prog)s %(version)s")
def main() -> None:
    """Almanac: durable memory for AI agents, served over MCP.

    Every command finds the data directory the same way: --data-dir, else $ALMANAC_DATA_DIR,
    else data_dir in the config file, else $XDG_DATA_HOME/almanac (~/.local/share/almanac)."""


for _command in COMMANDS:
    main.add_command(_command)
