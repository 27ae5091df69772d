"""``almanac engine reindex|doctor``: offline maintenance of one workspace folder.

The gateway never imports the engine: these run the engine's own command line
(``python -m engine --reindex|--doctor --dir …``) as a child process, passing its progress and
report through and exiting with its status."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gateway.cli.common import (
    UserPath,
    config_option,
    data_dir_option,
    reports_errors,
    run_engine,
    workspace_folder,
    workspace_options,
)

_folder = click.argument("folder", required=False, type=UserPath(file_okay=False, path_type=Path))


@click.group()
def engine() -> None:
    """Maintain a workspace offline (its engine must not be running)."""


@engine.command("reindex")
@_folder
@workspace_options
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
@workspace_options
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
