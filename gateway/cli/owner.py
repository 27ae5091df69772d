"""``almanac owner …``: accounts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gateway import erasure, layout
from gateway.auth.passwords import hash_password
from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors
from gateway.cluster.copies import erase_copies, placed_on_lost_nodes
from gateway.cluster.remote import erase_on_their_nodes


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


@owner.command("erase")
@click.argument("email")
@click.option(
    "--finish",
    is_flag=True,
    required=True,
    help="Finish an erase that began on the Account page but could not delete every file.",
)
@data_dir_option
@config_option
@reports_errors
def owner_erase(email: str, finish: bool, data_dir: Path | None, config_file: Path | None) -> None:
    """Finish erasing an account whose erase failed part-way (the owner is locked out; a file or
    folder could not be deleted): delete what is left of its workspaces and engine logs, then every
    row about the owner. Run it once the cause is fixed; it refuses an account not being erased,
    and leaves alone a workspace an engine still serves. With several nodes (database_url and
    cluster_secret set), each placed workspace is erased by the node that holds it, and every copy
    a move left on another node (the moves records name it) by that node; the rows stay until every
    copy is gone. A copy on a node declared lost (`almanac node lost`) is not waited for: its disk is
    gone (audited as account.erase.lost_copy)."""
    settings = make_settings(config_file, data_dir=data_dir)
    root = settings.data_dir
    with control_plane(config_file, data_dir) as store:
        owner_id, workspaces = store.owner_being_erased(email)
        store.audit("account.erase.finish", owner_id=owner_id, detail={"workspaces": len(workspaces)})
        elsewhere: list[str] = []
        count = len(workspaces)
        if settings.database_url is not None and settings.cluster_secret is not None:
            # several nodes: each placed workspace is erased by its own node, on its own disk (one
            # placed on a node declared lost has nothing left to erase: audited, not waited for)
            lost = placed_on_lost_nodes(store, owner_id, [w.id for w in workspaces])
            unplaced, elsewhere = erase_on_their_nodes(
                store, settings.cluster_secret, [w.id for w in workspaces if w.id not in lost]
            )
            for _ in elsewhere:
                store.audit(
                    "account.erase.failed", owner_id=owner_id, detail={"error": "not deleted on its node"}
                )
            elsewhere += erase_copies(store, settings.cluster_secret, owner_id, [w.id for w in workspaces])
            workspaces = [w for w in workspaces if w.id in unplaced]
        if elsewhere:  # the rows stay, so this can be run again
            done = erasure.Erased(count, tuple(elsewhere))
        else:
            done = erasure.finish(store, root, owner_id, workspaces)
    if done.failed:
        for path in done.failed:
            click.echo(f"could not delete {path}", err=True)
        click.echo(
            "error: the account is still locked out; fix the cause (see the log) and run this again",
            err=True,
        )
        sys.exit(1)
    click.echo(f"erased the account {owner_id} and its {count} workspace(s)", err=True)
