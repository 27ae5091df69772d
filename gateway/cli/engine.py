"""``almanac engine reindex|doctor``: offline maintenance of one workspace folder.

The gateway never imports the engine: these run the engine's own command line
(``python -m engine --reindex|--doctor --dir …``) as a child process, passing its progress and
report through and exiting with its status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from gateway import layout
from gateway.cli.common import (
    UserPath,
    config_option,
    control_plane,
    data_dir_option,
    make_settings,
    reports_errors,
)
from gateway.control.store import DEFAULT_WORKSPACE
from gateway.errors import BadRequest

_folder = click.argument("folder", required=False, type=UserPath(file_okay=False, path_type=Path))
_owner = click.option("--owner", "email", default=None, help="Find the folder by owner (instead of FOLDER).")
_workspace = click.option(
    "--workspace", "workspace_name", default=DEFAULT_WORKSPACE, show_default=True,
    help="With --owner: which of the owner's workspaces.",
)  # fmt: skip


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
        ws = store.workspace_by_name(store.owner_by_email(str(email)).id, workspace_name)
    return layout.workspace_dir(root, ws.id)


def run_engine(*args: str) -> int:
    """The engine's command line in a child process; its stderr (progress, report) passes through."""
    return subprocess.call([sys.executable, "-m", "engine", *args], stdin=subprocess.DEVNULL)


@click.group()
def engine() -> None:
    """Maintain a workspace offline (its engine must not be running)."""


@engine.command("reindex")
@_folder
@_owner
@_workspace
@click.option("--create", is_flag=True, help="Accept a folder that is not a workspace yet.")
@data_dir_option
@config_option
@reports_errors
def engine_reindex(
    folder: Path | None,
    email: str | None,
    workspace_name: str,
    create: bool,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Delete a workspace's index and rebuild it from its Markdown store, showing progress.

    The store is never changed. Refuses a folder that is not a workspace (unless --create) and a
    workspace whose engine is running."""
    target = workspace_folder(folder, email, workspace_name, data_dir, config_file)
    sys.exit(run_engine("--reindex", "--dir", str(target), *(["--create"] if create else [])))


@engine.command("doctor")
@_folder
@_owner
@_workspace
@data_dir_option
@config_option
@reports_errors
def engine_doctor(
    folder: Path | None,
    email: str | None,
    workspace_name: str,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Check a workspace's index against its store and report (exit 1 when it finds problems).

    Reads only: nothing is repaired (reindex does that)."""
    target = workspace_folder(folder, email, workspace_name, data_dir, config_file)
    sys.exit(run_engine("--doctor", "--dir", str(target)))
