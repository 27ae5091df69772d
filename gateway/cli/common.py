"""What every ``almanac`` command shares: path options, the one settings read, one-line errors.

This package and :mod:`gateway.serve` are the composition root: the only places that read
``os.environ`` and the config file, once, into a :class:`~gateway.settings.Settings`.
Output contract: ``token create`` prints only the token on stdout; everything else a human reads
goes to stderr, except listings (stdout, one row per line, tab-separated).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from gateway import layout
from gateway.control.owners import DEFAULT_WORKSPACE
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, ConfigError, DataDirError, GatewayError
from gateway.settings import Settings, config_file_path, default_data_dir, load_settings, parse_toml

F = TypeVar("F", bound=Callable[..., Any])


class UserPath(click.Path):
    """A path argument with ``~`` expanded (a JSON client config or ``--opt=~/x`` has no shell to do it)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            value = os.path.expanduser(value)
        return super().convert(value, param, ctx)


data_dir_option = click.option(
    "--data-dir",
    # readable=False: an unreadable folder is reported by make_settings, in one line with the fix
    type=UserPath(file_okay=False, readable=False, path_type=Path),
    default=None,
    help="Where Almanac keeps its data. Default: $ALMANAC_DATA_DIR, else data_dir in the config file, "
    "else $XDG_DATA_HOME/almanac (~/.local/share/almanac).",
)
config_option = click.option(
    "--config",
    "config_file",
    type=UserPath(dir_okay=False, exists=True, readable=False, path_type=Path),
    default=None,
    help="A TOML config file (default $ALMANAC_CONFIG, else <data-dir>/almanac.toml if present).",
)


def make_settings(config_file: Path | None, **overrides: object) -> Settings:
    """Read the config file and the environment once, apply CLI overrides, validate.

    The data directory is, first found: ``--data-dir``, ``$ALMANAC_DATA_DIR``, ``data_dir`` in the
    config file, the per-user default — the same for every command, wherever it is run from."""
    env = dict(os.environ)
    early = overrides.get("data_dir") or env.get("ALMANAC_DATA_DIR")
    guess = Path(str(early)).expanduser() if early else default_data_dir(env)
    readable_dir(guess)
    path = config_file_path(config_file, env, guess)
    file_values: dict[str, object] = {}
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the config file {path} ({exc.strerror}); make it readable by the user "
                "running almanac, or name another with --config (ALMANAC_CONFIG)"
            ) from None
        file_values = parse_toml(text, source=str(path))
    settings = load_settings(file_values=file_values, env=env, overrides=overrides)
    readable_dir(settings.data_dir)
    return replace(settings, data_dir=settings.data_dir.absolute())


def readable_dir(data_dir: Path) -> None:
    """Refuse, in one line with the fix, a data directory this user cannot open (one that does not
    exist yet is for each command to create or refuse)."""
    try:
        if data_dir.exists():
            with os.scandir(data_dir):
                pass
    except OSError as exc:
        raise DataDirError(
            f"cannot read the data directory {data_dir} ({exc.strerror}); give the user running almanac "
            "read and write access to it (chown/chmod), or choose another with --data-dir"
        ) from None


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
def control_plane(
    config_file: Path | None, data_dir: Path | None, *, create: bool = False
) -> Iterator[ControlPlane]:
    """The control plane of the resolved data directory. An admin command never creates one by
    accident (a typo in --data-dir would otherwise start an empty, silent second instance)."""
    settings = make_settings(config_file, data_dir=data_dir)
    store = ControlPlane.connect(settings.database_url, layout.control_db(settings.data_dir), create=create)
    try:
        yield store
    finally:
        store.close()


def workspace_options(fn: F) -> F:
    """``--owner`` and ``--workspace``: find a workspace's folder through the control plane."""
    fn = click.option(
        "--workspace",
        "workspace_name",
        default=DEFAULT_WORKSPACE,
        show_default=True,
        help="With --owner: which of the owner's workspaces.",
    )(fn)
    return click.option(
        "--owner", "email", default=None, help="Find the workspace by owner (instead of FOLDER)."
    )(fn)


def workspace_folder(
    folder: Path | None,
    email: str | None,
    workspace_name: str,
    data_dir: Path | None,
    config_file: Path | None,
) -> Path:
    """FOLDER as given, or the folder of an owner's workspace in the data directory."""
    if (folder is None) == (email is None):
        raise BadRequest("give either a workspace FOLDER or --owner EMAIL (with --workspace NAME)")
    if folder is not None:
        return folder.absolute()
    root = make_settings(config_file, data_dir=data_dir).data_dir
    with control_plane(config_file, data_dir) as store:
        ws = store.owners.workspace_by_name(store.owners.by_email(str(email)).id, workspace_name)
    return layout.workspace_dir(root, ws.id)


def run_engine(*args: str) -> int:
    """The engine's own command line in a child process (the gateway never imports the engine);
    its stderr (progress, report, refusals) passes through. Returns its exit status."""
    return subprocess.call([sys.executable, "-m", "engine", *args], stdin=subprocess.DEVNULL)
