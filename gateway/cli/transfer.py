"""``almanac import …`` / ``almanac export …``: a workspace's memories in and out as files.

They run the engine's own command line (``python -m engine --import|--export``) on the workspace's
folder; the engine must be stopped (it holds the workspace's lock), and they say so otherwise."""

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
from gateway.engines.supervisor import EXIT_LOCKED


@click.command("export")
@click.argument("target", type=UserPath(dir_okay=False, path_type=Path))
@click.argument("folder", required=False, type=UserPath(file_okay=False, path_type=Path))
@workspace_options
@data_dir_option
@config_option
@reports_errors
def export(
    target: Path,
    folder: Path | None,
    email: str | None,
    workspace_name: str,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Write a workspace's store to a new zip file TARGET (the Markdown files as on disk, plus a
    manifest). Give the workspace as FOLDER, or by --owner (and --workspace)."""
    where = workspace_folder(folder, email, workspace_name, data_dir, config_file)
    sys.exit(_busy_hint(run_engine("--export", str(target.absolute()), "--dir", str(where))))


@click.command("import")
@click.argument("source", type=UserPath(exists=True, path_type=Path))
@click.argument("folder", required=False, type=UserPath(file_okay=False, path_type=Path))
@click.option(
    "--label", default=None, help="Markdown goes to notes/Imported/LABEL/ (not needed for an export)."
)
@click.option("--create", is_flag=True, help="Accept a FOLDER that is not a workspace yet.")
@workspace_options
@data_dir_option
@config_option
@reports_errors
def import_(
    source: Path,
    folder: Path | None,
    label: str | None,
    create: bool,
    email: str | None,
    workspace_name: str,
    data_dir: Path | None,
    config_file: Path | None,
) -> None:
    """Import SOURCE, a folder or zip: an Almanac export (restored into an empty workspace, exactly),
    or Markdown files (each becomes a note under notes/Imported/LABEL/, frontmatter and wikilinks
    kept; other files are skipped and listed). Give the workspace as FOLDER, or by --owner."""
    where = workspace_folder(folder, email, workspace_name, data_dir, config_file)
    args = ["--import", str(source.absolute()), "--dir", str(where)]
    if label is not None:
        args += ["--label", label]
    if create or email is not None:  # an owner's workspace is registered, even before its first start
        args.append("--create")
    sys.exit(_busy_hint(run_engine(*args)))


#: Said after the engine's own refusal when the workspace's engine is running (exit 3).
SERVED_HINT = (
    "While the gateway serves this workspace, import and export it on the Workspace page of the "
    "site (/workspace), or stop the gateway and run this again."
)


def _busy_hint(code: int) -> int:
    """The engine's exit status, after pointing to the Workspace page when the workspace is busy."""
    if code == EXIT_LOCKED:
        click.echo(SERVED_HINT, err=True)
    return code
