"""``almanac owner …``: accounts, and their passwords.

A password is chosen on a terminal (asked twice, hidden) or read from stdin with
``--password-stdin`` (for scripts); either way it follows the one set of rules in
:mod:`gateway.auth.passwords`, as sign-up and the reset page do. ``reset-link`` prints a one-time,
expiring URL where the owner sets a password themselves (``/reset/<secret>``)."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path

import click

from gateway import erasure, layout
from gateway.auth import passwords
from gateway.cli.common import config_option, control_plane, data_dir_option, make_settings, reports_errors
from gateway.cluster.copies import erase_copies, placed_on_lost_nodes
from gateway.cluster.dbclock import database_clock
from gateway.cluster.remote import erase_on_their_nodes
from gateway.errors import BadRequest, InvalidPassword
from gateway.serve import url_of
from gateway.settings import Settings

#: How many times a terminal is asked for a password before giving up.
TRIES = 3
#: A reset link works this many hours unless --hours says otherwise (at most MAX_HOURS).
DEFAULT_HOURS, MAX_HOURS = 24, 168

password_stdin_option = click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from stdin (its first line) instead of asking on the terminal.",
)
url_option = click.option(
    "--url",
    default=None,
    help="The gateway's address as the owner reaches it, for the link (default: public_url, else "
    "http://host:port from the settings).",
)


def _from_stdin() -> str:
    line = sys.stdin.readline().rstrip("\r\n")
    if not line:
        raise InvalidPassword("stdin held no password: give it on the first line")
    return passwords.check_password(line)


def _from_terminal(email: str, *, optional: bool) -> str | None:
    """Ask twice, hidden, until the two agree and follow the rules (at most :data:`TRIES` times).
    ``optional``: an empty first answer means no password (None)."""
    for _ in range(TRIES):
        first = getpass.getpass(f"New password for {email}" + (" (Enter for none): " if optional else ": "))
        if not first and optional:
            return None
        second = getpass.getpass("Type it again: ")
        try:
            return passwords.check_new_password(first, second)
        except InvalidPassword as exc:
            click.echo(f"{exc.message}", err=True)
    raise InvalidPassword(f"no password set after {TRIES} tries; nothing was changed")


def _base(settings: Settings, url: str | None) -> str:
    """Where the owner reaches the gateway: ``--url``, else the address ``serve`` prints."""
    if url is None and settings.public_url is None and settings.port == 0:
        raise BadRequest("the gateway's port is chosen when it starts (port 0): pass --url http://HOST:PORT")
    base = url or url_of(settings.host, settings.port, settings.public_url)
    if not base.startswith(("http://", "https://")):
        raise BadRequest(f"--url must start with http:// or https://, not {base!r}")
    return base.rstrip("/")


@click.group()
def owner() -> None:
    """Manage owners (accounts) and their passwords."""


@owner.command("create")
@click.argument("email")
@password_stdin_option
@url_option
@data_dir_option
@config_option
@reports_errors
def owner_create(
    email: str, password_stdin: bool, url: str | None, data_dir: Path | None, config_file: Path | None
) -> None:
    """Create an owner with a 'default' workspace, and choose its password.

    On a terminal the password is asked twice, hidden (press Enter for none: a one-time link to set
    one is printed instead). With --password-stdin, or when stdin is not a terminal, it is read from
    stdin's first line (empty: none). The first owner may be created before the service ever started:
    this sets up the data directory (and says so)."""
    password: str | None
    if password_stdin:
        password = _from_stdin()
    elif sys.stdin.isatty():
        password = _from_terminal(email, optional=True)
    else:
        line = sys.stdin.readline().rstrip("\r\n")
        password = passwords.check_password(line) if line else None
    settings = make_settings(config_file, data_dir=data_dir)
    base = _base(settings, url) if password is None and sys.stdin.isatty() else None
    where = settings.data_dir
    fresh = not layout.control_db(where).exists()
    link = expires = None
    with control_plane(config_file, data_dir, create=True) as store:
        created, workspace = store.owners.create(
            email, passwords.hash_password(password) if password else None
        )
        if base is not None:
            secret, expires = store.passwords.create_reset_link(created.id, ttl=DEFAULT_HOURS * 3600)
            link = f"{base}/reset/{secret}"
    if fresh:
        click.echo(f"set up a new data directory at {where}", err=True)
    click.echo(f"created owner {created.email} ({created.id}) with workspace {workspace.name!r}", err=True)
    if link is not None:
        click.echo(link)
        click.echo(
            f"no password yet: open the link above to set one (it works once, until {expires})", err=True
        )
    elif password is None:
        click.echo(
            f"no password set: `almanac owner set-password {created.email}` or "
            f"`almanac owner reset-link {created.email}` gives the owner one",
            err=True,
        )


@owner.command("set-password")
@click.argument("email")
@password_stdin_option
@data_dir_option
@config_option
@reports_errors
def owner_set_password(
    email: str, password_stdin: bool, data_dir: Path | None, config_file: Path | None
) -> None:
    """Set an owner's password: asked twice on the terminal, hidden, or read from stdin with
    --password-stdin. The owner's browsers stay signed in; the next sign-in needs the new one."""
    if not password_stdin and not sys.stdin.isatty():
        raise BadRequest("stdin is not a terminal: pass --password-stdin to read the password from it")
    with control_plane(config_file, data_dir) as store:  # an unusable data dir or owner: before asking
        found = store.owners.by_email(email)
        if password_stdin:
            password = _from_stdin()
        else:
            chosen = _from_terminal(email, optional=False)
            assert chosen is not None
            password = chosen
        store.passwords.set_password(found.id, passwords.hash_password(password), via="cli")
    click.echo(f"set the password of {found.email}", err=True)


@owner.command("reset-link")
@click.argument("email")
@click.option(
    "--hours",
    type=click.IntRange(1, MAX_HOURS),
    default=DEFAULT_HOURS,
    show_default=True,
    help="How long the link works (it works once).",
)
@url_option
@data_dir_option
@config_option
@reports_errors
def owner_reset_link(
    email: str, hours: int, url: str | None, data_dir: Path | None, config_file: Path | None
) -> None:
    """Print a one-time link (only it, on stdout) where the owner sets a new password themselves.

    Give it to the owner privately: whoever opens it can set the password. It works once, until it
    expires; using it ends every session the owner had. Creating and using it are audited."""
    base = _base(make_settings(config_file, data_dir=data_dir), url)
    with control_plane(config_file, data_dir) as store:
        found = store.owners.by_email(email)
        secret, expires = store.passwords.create_reset_link(found.id, ttl=hours * 3600)
    click.echo(f"{base}/reset/{secret}")
    click.echo(f"a password-reset link for {found.email}; it works once, until {expires}", err=True)


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
        owner_id, workspaces = store.erasure.owner_being_erased(email)
        store.audit_log.record(
            "account.erase.finish", owner_id=owner_id, detail={"workspaces": len(workspaces)}
        )
        elsewhere: list[str] = []
        count = len(workspaces)
        if settings.database_url is not None and settings.cluster_secret is not None:
            # several nodes: each placed workspace is erased by its own node, on its own disk (one
            # placed on a node declared lost has nothing left to erase: audited, not waited for)
            lost = placed_on_lost_nodes(store, owner_id, [w.id for w in workspaces])
            clock = database_clock(store.database_time).now
            unplaced, elsewhere = erase_on_their_nodes(
                store, settings.cluster_secret, [w.id for w in workspaces if w.id not in lost], clock=clock
            )
            for _ in elsewhere:
                store.audit_log.record(
                    "account.erase.failed", owner_id=owner_id, detail={"error": "not deleted on its node"}
                )
            elsewhere += erase_copies(
                store, settings.cluster_secret, owner_id, [w.id for w in workspaces], clock=clock
            )
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
