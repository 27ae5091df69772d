"""``almanac workspace …``: an owner's workspaces and what they hold."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import click

from gateway import layout
from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors
from gateway.cluster.dbclock import database_clock
from gateway.cluster.journal import describe
from gateway.cluster.move import driver as move_driver
from gateway.cluster.move.driver import MoveConfig
from gateway.cluster.restore import driver as restore_driver
from gateway.cluster.usage import node_state, usage_on
from gateway.control.clock import iso
from gateway.control.owners import DEFAULT_WORKSPACE
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
        created = store.owners.create_workspace(store.owners.by_email(email).id, name)
    click.echo(f"created workspace {created.name!r} ({created.id})", err=True)


@workspace.command("list")
@click.option("--owner", "email", required=True, help="The owner's email.")
@data_dir_option
@config_option
@reports_errors
def workspace_list(email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """List an owner's workspaces (id, name, created, folder). With several nodes (database_url),
    also the node each is placed on and that node's state (live, down, lost, volume-mismatch;
    "-" for one not placed yet); the folder is then "-" for a workspace placed on another node
    than this one (ALMANAC_NODE): its files are on that node's disk."""
    settings = make_settings(config_file, data_dir=data_dir)
    root = settings.data_dir
    with control_plane(config_file, data_dir) as store:
        found = store.owners.workspaces(store.owners.by_email(email).id)
        if settings.database_url is None:
            for ws in found:
                click.echo(f"{ws.id}\t{ws.name}\t{ws.created_at}\t{layout.workspace_dir(root, ws.id)}")
            return
        nodes = {n.name: n for n in store.nodes.all()}
        now = store.database_time()
        placements = {ws.id: store.nodes.placement(ws.id) for ws in found}
    for ws in found:
        placement = placements[ws.id]
        node = None if placement is None else nodes.get(placement.node)
        here = placement is None or placement.node == settings.node
        folder = layout.workspace_dir(root, ws.id) if here else "-"
        name = "-" if placement is None else placement.node
        state = "-" if node is None else node_state(node, now=now, heartbeat_timeout=settings.placement_lease)
        click.echo(f"{ws.id}\t{ws.name}\t{ws.created_at}\t{folder}\t{name}\t{state}")


@workspace.command("usage")
@click.argument("name", default=DEFAULT_WORKSPACE)
@click.option("--owner", "email", required=True, help="The owner's email.")
@data_dir_option
@config_option
@reports_errors
def workspace_usage(name: str, email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Show what a workspace holds: Markdown files by kind, bytes of store and of index.

    With several nodes (database_url), a workspace placed on another node than this one
    (ALMANAC_NODE) is measured by that node, asked over the signed internal API (needs
    cluster_secret); if that node is down, lost or unreachable, this says so and exits 1."""
    settings = make_settings(config_file, data_dir=data_dir)
    with control_plane(config_file, data_dir) as store:
        ws = store.owners.workspace_by_name(store.owners.by_email(email).id, name)
        placement = None if settings.database_url is None else store.nodes.placement(ws.id)
        if placement is not None and placement.node != settings.node:
            click.echo(f"workspace\t{ws.name}\nnode\t{placement.node}")
            if settings.cluster_secret is None:
                raise ConfigError(
                    f"workspace {ws.name!r} is on node {placement.node!r}; set ALMANAC_CLUSTER_SECRET as on "
                    "the nodes to ask it"
                )
            found = usage_on(
                store,
                ws.id,
                placement.node,
                secret=settings.cluster_secret,
                heartbeat_timeout=settings.placement_lease,
                clock=database_clock(store.database_time).now,
            )
            click.echo(f"folder\t{found.folder}")
            for label, value in found.rows:
                click.echo(f"{label}\t{value}")
            return
    folder = layout.workspace_dir(settings.data_dir, ws.id)
    click.echo(f"workspace\t{ws.name}\nfolder\t{folder}")
    for label, value in measure(folder).rows():
        click.echo(f"{label}\t{value}")


@workspace.command("move")
@click.argument("name")
@click.option("--owner", "email", required=True, help="The owner's email.")
@click.option("--to", "target", default=None, help="The node to move the workspace to.")
@click.option("--status", is_flag=True, help="Show the workspace's moves and what each left to do.")
@click.option(
    "--finish",
    is_flag=True,
    help="Complete every move that switched the workspace but kept the old copy (the last one and "
    "earlier ones): delete each old copy once the workspace's node has served it.",
)
@data_dir_option
@config_option
@reports_errors
def workspace_move(
    name: str,
    email: str,
    target: str | None,
    status: bool,
    finish: bool,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Move a workspace to another node: copy its folder node to node while it is served, then
    refuse it for a short final sync of what changed, verify every file's SHA-256, switch it over,
    and delete the old copy once the new node serves it.

    A move whose command stops before the switch is called off after move_timeout (the workspace is
    served where it was); one that stops after it keeps the old copy until --finish, which deletes
    the old copies every such move left (not only the last move's).
    Needs the shared control plane (database_url) and the nodes' cluster_secret."""
    if sum((target is not None, status, finish)) != 1:
        raise click.UsageError("give exactly one of --to NODE, --status or --finish")
    config = _move_config(config_file, data_dir, "moving a workspace")
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    with control_plane(config_file, data_dir) as store:
        ws = store.owners.workspace_by_name(store.owners.by_email(email).id, name)
        clock = database_clock(store.database_time).now  # deadlines and signatures: the database's
        if status:
            placement = store.nodes.placement(ws.id)
            where = "nowhere yet" if placement is None else placement.node
            if placement is not None and placement.moving_to is not None:
                left = max(0.0, (placement.move_deadline or 0.0) - clock())
                where += f" (moving to {placement.moving_to}; called off unless advanced within {left:.0f} s)"
            click.echo(f"workspace\t{ws.name}\t{ws.id}\ton {where}")
            for record in store.moves.of_workspace(ws.id):
                click.echo(f"{iso(record.began_at)}\t{record.id}\t{describe(record)}")
            return
        if finish:
            for done in move_driver.finish(store, ws.id, config, clock=clock, say=say):
                click.echo(
                    f"finished moving workspace {ws.name!r} ({ws.id}) to {done.target}: "
                    f"the old copy on {done.source} is deleted",
                    err=True,
                )
            return
        assert target is not None
        report = move_driver.move(store, ws.id, target, config, clock=clock, say=say, pause=_test_pause())
    refused = "" if report.source is None else f"; calls refused for {report.refused_for:.2f} s"
    click.echo(
        f"moved workspace {ws.name!r} ({ws.id}) to {report.target}: {report.files} files{refused}", err=True
    )


@workspace.command("restore")
@click.argument("name")
@click.option("--owner", "email", required=True, help="The owner's email.")
@click.option(
    "--from",
    "backup",
    default=None,
    type=click.Path(path_type=Path),
    help="The backup: a copy of the workspace's folder (from a volume snapshot or a sync), or the "
    "owner's export (the .zip `almanac export` and the Workspace page write).",
)
@click.option("--to", "target", default=None, help="The live node to restore the workspace on.")
@click.option(
    "--abandon",
    is_flag=True,
    help="Abandon the restore under way (its command killed or still running): the workspace is "
    "lost again and the node it was sent to removes what it received.",
)
@data_dir_option
@config_option
@reports_errors
def workspace_restore(
    name: str,
    email: str,
    backup: Path | None,
    target: str | None,
    abandon: bool,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Restore a workspace whose node was declared lost (`almanac node lost`) from a backup of its
    folder or from its owner's export, on another node: every file is streamed to that node,
    checked there by size and SHA-256 against the backup, and only then is the workspace switched
    to it and served. What the backup does not hold (writes after it was taken) is not recovered.
    Refused, changing nothing, for a workspace whose node is not declared lost, or a backup that
    cannot be restored (an export is checked whole first: its manifest, each file's path, size and
    SHA-256, the workspace it names). Needs database_url and cluster_secret.

    While it runs the workspace answers 503 workspace_restoring. A restore whose command stops
    half-way is called off after move_timeout (the workspace is lost again; nothing it sent is
    served); running the same restore again redoes it, or finishes it once it was switched, and
    --abandon calls it off at once. Once it is done, a restore naming another backup is refused:
    the workspace serves the one restored and whatever was written since."""
    if abandon == (backup is not None or target is not None) or (
        not abandon and (backup is None or target is None)
    ):
        raise click.UsageError("give --from BACKUP and --to NODE, or --abandon alone")
    config = _move_config(config_file, data_dir, "restoring a workspace")
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    with control_plane(config_file, data_dir) as store:
        ws = store.owners.workspace_by_name(store.owners.by_email(email).id, name)
        clock = database_clock(store.database_time).now
        if abandon:
            restore_driver.abandon(store, ws.owner_id, ws.id, config, clock=clock, say=say)
            click.echo(f"abandoned the restore of workspace {ws.name!r} ({ws.id}): it is lost", err=True)
            return
        assert backup is not None and target is not None
        report = restore_driver.restore(
            store, ws.owner_id, ws.id, backup, target, config, clock=clock, say=say, pause=_test_pause()
        )
    if report.files == 0:  # the same restore, run again after it switched the workspace
        click.echo(f"workspace {ws.name!r} ({ws.id}) is restored on {report.target}", err=True)
        return
    click.echo(
        f"restored workspace {ws.name!r} ({ws.id}) on {report.target} from {backup}: {report.files} files "
        f"checked; the copy on the lost node {report.source} is not used",
        err=True,
    )


#: Tests only: ``SEAM:FILE`` makes a move stop at SEAM (caught-up, released, copied, flipped, served;
#: a restore: half-sent, sent, settled, flipped), create
#: ``FILE.reached`` and wait until FILE exists — so a test can kill the command at that seam.
TEST_PAUSE_ENV = "ALMANAC_TEST_MOVE_PAUSE"


def _test_pause() -> Callable[[str], None]:
    wanted = os.environ.get(TEST_PAUSE_ENV, "")
    if ":" not in wanted:
        return move_driver.no_pause
    seam, file = wanted.split(":", 1)

    def pause(at: str) -> None:
        if at != seam:
            return
        Path(file + ".reached").write_text(at)
        deadline = time.monotonic() + 600
        while not Path(file).exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    return pause


def _move_config(config_file: Path | None, data_dir: Path | None, doing: str) -> MoveConfig:
    """What a move or a restore needs from the settings; ``doing`` names it in the refusal."""
    settings = make_settings(config_file, data_dir=data_dir)
    if settings.database_url is None or settings.cluster_secret is None:
        raise ConfigError(
            f"{doing} needs the nodes' control plane and secret: set ALMANAC_DATABASE_URL "
            "and ALMANAC_CLUSTER_SECRET as on the nodes"
        )
    return MoveConfig(
        secret=settings.cluster_secret,
        lease=settings.placement_lease,
        heartbeat_timeout=settings.placement_lease,
        timeout=settings.move_timeout,
    )
