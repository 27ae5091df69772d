"""``almanac token …``: personal access tokens, each one a named connection.

Listing goes through :func:`connection_fields` so other kinds of connection (OAuth clients) can join
the same table without a second command."""

from __future__ import annotations

from pathlib import Path

import click

from gateway.cli.common import config_option, control_plane, data_dir_option, reports_errors
from gateway.control.owners import DEFAULT_WORKSPACE
from gateway.control.records import Connection
from gateway.errors import BadRequest


@click.group()
def token() -> None:
    """Manage personal access tokens (each one is a named connection)."""


@token.command("create")
@click.option("--owner", "email", required=True, help="The owner's email.")
@click.option("--name", required=True, help="The connection's name: the source of what it writes.")
@click.option(
    "--workspace",
    "workspace_name",
    default=DEFAULT_WORKSPACE,
    show_default=True,
    help="Which of the owner's workspaces the token opens.",
)
@click.option("--read-only", is_flag=True, help="The token can read but never write.")
@click.option(
    "--scope",
    default=None,
    help="Pin the token to one scope label, e.g. project:fjord: it writes, retires and restores only "
    "there, and reads only there unless --reads-unscoped.",
)
@click.option(
    "--reads-unscoped",
    is_flag=True,
    help="With --scope: the token also reads unscoped memories (default: this scope only).",
)
@data_dir_option
@config_option
@reports_errors
def token_create(
    email: str,
    name: str,
    workspace_name: str,
    read_only: bool,
    scope: str | None,
    reads_unscoped: bool,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Create a token and print it (only it) on stdout. It is shown once and stored as a hash."""
    if reads_unscoped and scope is None:
        raise BadRequest("--reads-unscoped needs --scope: a token without a scope reads everything anyway")
    with control_plane(config_file, data_dir) as store:
        found = store.owners.by_email(email)
        ws = store.owners.workspace_by_name(found.id, workspace_name)
        connection, secret = store.connections.create_pat(
            found.id, ws.id, name, read_only=read_only, scope=scope, reads_unscoped=reads_unscoped
        )
    click.echo(secret)
    click.echo(
        f"token {connection.name!r} ({connection.id}) for workspace {ws.name!r}; it will not be shown again",
        err=True,
    )


@token.command("list")
@click.option("--owner", "email", required=True, help="The owner's email.")
@click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
@data_dir_option
@config_option
@reports_errors
def token_list(email: str, include_revoked: bool, data_dir: Path | None, config_file: Path | None) -> None:
    """List connections: id, name, workspace, access, scope, prefix, created, last used, revoked, kind.

    A pinned scope is shown as `project:fjord` (reads that scope only) or `project:fjord+unscoped`
    (reads unscoped memories too).

    kind is pat (a personal access token) or oauth (a client that signed in, which has no prefix)."""
    with control_plane(config_file, data_dir) as store:
        rows = store.connections.of_owner(store.owners.by_email(email).id, include_revoked=include_revoked)
    for c in rows:
        click.echo("\t".join(connection_fields(c)))


def connection_fields(c: Connection) -> list[str]:
    """One listing row: id, name, workspace, access, scope, prefix, created, last used, revoked, kind."""
    return [
        c.id,
        c.name,
        c.workspace_name,
        "read-only" if c.read_only else "read-write",
        "-" if c.scope is None else c.scope + ("+unscoped" if c.reads_unscoped else ""),
        (c.token_prefix or "-") + "…",
        c.created_at,
        c.last_used_at or "-",
        c.revoked_at or "-",
        c.kind,
    ]


@token.command("revoke")
@click.argument("token_id_or_name")
@click.option("--owner", "email", required=True, help="The owner's email.")
@data_dir_option
@config_option
@reports_errors
def token_revoke(token_id_or_name: str, email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Revoke a token by its id or name; it stops working at once."""
    with control_plane(config_file, data_dir) as store:
        revoked = store.connections.revoke(store.owners.by_email(email).id, token_id_or_name, via="cli")
    click.echo(f"revoked token {revoked.name!r} ({revoked.id})", err=True)
