"""``almanac …`` (``run:cli``): serve, and manage owners, workspaces and tokens.

This module and :mod:`gateway.serve` are the composition root: the only places that read
``os.environ`` and the config file, once, into a :class:`~gateway.settings.Settings`.
Output contract: ``token create`` prints only the token on stdout; everything else a human reads
goes to stderr, except listings (stdout, one row per line, tab-separated).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from gateway import layout
from gateway.auth.passwords import hash_password
from gateway.control.store import DEFAULT_WORKSPACE, ControlPlane
from gateway.errors import ConfigError, GatewayError
from gateway.serve import run
from gateway.settings import Settings, config_file_path, load_settings, parse_toml

F = TypeVar("F", bound=Callable[..., Any])

_data_dir = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where Almanac keeps its data (default ./data, or $ALMANAC_DATA_DIR).",
)
_config = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A TOML config file (default $ALMANAC_CONFIG, else <data-dir>/almanac.toml if present).",
)


def make_settings(config_file: Path | None, **overrides: object) -> Settings:
    """Read the config file and the environment once, apply CLI overrides, validate."""
    env = dict(os.environ)
    data_dir = overrides.get("data_dir") or env.get("ALMANAC_DATA_DIR") or "data"
    path = config_file_path(config_file, env, Path(str(data_dir)))
    file_values: dict[str, object] = {}
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        file_values = parse_toml(text, source=str(path))
    return load_settings(file_values=file_values, env=env, overrides=overrides)


def reports_errors(fn: F) -> F:
    """Turn gateway errors into one line on stderr and a non-zero exit (2 for configuration)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GatewayError as exc:
            click.echo(f"error: {exc.message}", err=True)
            sys.exit(2 if isinstance(exc, ConfigError) else 1)

    return wrapper  # type: ignore[return-value]


@contextmanager
def control_plane(config_file: Path | None, data_dir: Path | None) -> Iterator[ControlPlane]:
    settings = make_settings(config_file, data_dir=data_dir)
    store = ControlPlane.open(layout.control_db(settings.data_dir.resolve()))
    try:
        yield store
    finally:
        store.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Almanac: durable memory for AI agents, served over MCP."""


@main.command()
@click.option("--host", default=None, help="Interface to listen on (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to listen on (default 8080; 0 picks a free one).")
@_data_dir
@_config
@reports_errors
def serve(host: str | None, port: int | None, data_dir: Path | None, config_file: Path | None) -> None:
    """Start the gateway: MCP at /mcp, engines started on demand. Prints the URL."""
    run(make_settings(config_file, host=host, port=port, data_dir=data_dir))


# -- owners ----------------------------------------------------------------------------------


@main.group()
def owner() -> None:
    """Manage owners (accounts)."""


@owner.command("create")
@click.argument("email")
@_data_dir
@_config
@reports_errors
def owner_create(email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Create an owner with a 'default' workspace. A password, if any, is read from stdin."""
    password = None
    if not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n") or None
    with control_plane(config_file, data_dir) as store:
        created, workspace = store.create_owner(email, hash_password(password) if password else None)
    click.echo(f"created owner {created.email} ({created.id}) with workspace {workspace.name!r}", err=True)


# -- workspaces ------------------------------------------------------------------------------


@main.group()
def workspace() -> None:
    """Manage an owner's workspaces."""


@workspace.command("create")
@click.argument("name")
@click.option("--owner", "email", required=True, help="The owner's email.")
@_data_dir
@_config
@reports_errors
def workspace_create(name: str, email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Create another workspace for an owner."""
    with control_plane(config_file, data_dir) as store:
        created = store.create_workspace(store.owner_by_email(email).id, name)
    click.echo(f"created workspace {created.name!r} ({created.id})", err=True)


@workspace.command("list")
@click.option("--owner", "email", required=True, help="The owner's email.")
@_data_dir
@_config
@reports_errors
def workspace_list(email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """List an owner's workspaces (id, name, created)."""
    with control_plane(config_file, data_dir) as store:
        for ws in store.workspaces(store.owner_by_email(email).id):
            click.echo(f"{ws.id}\t{ws.name}\t{ws.created_at}")


# -- tokens ----------------------------------------------------------------------------------


@main.group()
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
@click.option("--scope", default=None, help="Pin the token to one scope label, e.g. project:fjord.")
@_data_dir
@_config
@reports_errors
def token_create(
    email: str,
    name: str,
    workspace_name: str,
    read_only: bool,
    scope: str | None,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Create a token and print it (only it) on stdout. It is shown once and stored as a hash."""
    with control_plane(config_file, data_dir) as store:
        found = store.owner_by_email(email)
        ws = store.workspace_by_name(found.id, workspace_name)
        connection, secret = store.create_pat(found.id, ws.id, name, read_only=read_only, scope=scope)
    click.echo(secret)
    click.echo(
        f"token {connection.name!r} ({connection.id}) for workspace {ws.name!r}; it will not be shown again",
        err=True,
    )


@token.command("list")
@click.option("--owner", "email", required=True, help="The owner's email.")
@click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
@_data_dir
@_config
@reports_errors
def token_list(email: str, include_revoked: bool, data_dir: Path | None, config_file: Path | None) -> None:
    """List tokens: id, name, workspace, access, scope, prefix, created, last used, revoked."""
    with control_plane(config_file, data_dir) as store:
        rows = store.connections(store.owner_by_email(email).id, include_revoked=include_revoked)
    for c in rows:
        access = "read-only" if c.read_only else "read-write"
        fields = [
            c.id,
            c.name,
            c.workspace_name,
            access,
            c.scope or "-",
            (c.token_prefix or "-") + "…",
            c.created_at,
            c.last_used_at or "-",
            c.revoked_at or "-",
        ]
        click.echo("\t".join(fields))


@token.command("revoke")
@click.argument("token_id_or_name")
@click.option("--owner", "email", required=True, help="The owner's email.")
@_data_dir
@_config
@reports_errors
def token_revoke(token_id_or_name: str, email: str, data_dir: Path | None, config_file: Path | None) -> None:
    """Revoke a token by its id or name; it stops working at once."""
    with control_plane(config_file, data_dir) as store:
        revoked = store.revoke(store.owner_by_email(email).id, token_id_or_name)
    click.echo(f"revoked token {revoked.name!r} ({revoked.id})", err=True)


# -- invites ---------------------------------------------------------------------------------


@main.group()
def invite() -> None:
    """Invite codes, for sign-up on the web when the setting `signup` is `invite`."""


@invite.command("create")
@click.option("--note", default=None, help="Who the code is for (kept in the audit log).")
@_data_dir
@_config
@reports_errors
def invite_create(note: str | None, data_dir: Path | None, config_file: Path | None) -> None:
    """Create a single-use invite code; it is printed once, alone on stdout."""
    with control_plane(config_file, data_dir) as store:
        code = store.create_invite(note)
    click.echo(code)
    click.echo("give it to the person who signs up at /signup; it works once", err=True)


# -- audit -----------------------------------------------------------------------------------


@main.command()
@click.option("--owner", "email", default=None, help="Only this owner's events.")
@click.option("--limit", type=int, default=50, show_default=True, help="How many of the newest events.")
@_data_dir
@_config
@reports_errors
def audit(email: str | None, limit: int, data_dir: Path | None, config_file: Path | None) -> None:
    """Show security events (token create/revoke, denials), newest first, as JSON lines."""
    with control_plane(config_file, data_dir) as store:
        owner_id = store.owner_by_email(email).id if email else None
        for event in store.audit_events(owner_id=owner_id, limit=limit):
            click.echo(json.dumps(event.__dict__, sort_keys=True))
