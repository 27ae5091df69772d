"""Deleting an erased owner's files, then forgetting them (SPEC §5 ``life:delete``), after the
control plane has locked them out (:meth:`~gateway.control.erasure.Erasure.lock_out_owner`).

Shared by the Account page (:mod:`gateway.web.erase`, after it stopped the owner's engines) and the
operator's ``almanac owner erase --finish EMAIL``, which finishes an erase that could not delete
every file. A workspace folder is deleted only while no engine holds its ``.almanac.lock``
(docs/store-format.md), so a folder an engine still serves is never pulled from under it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gateway import layout, logs
from gateway.control.records import Workspace
from gateway.control.store import ControlPlane

#: The engine's lock file in a workspace folder (held with ``flock`` while an engine serves it).
ENGINE_LOCK = ".almanac.lock"


@dataclass(frozen=True)
class Erased:
    workspaces: int
    failed: tuple[str, ...]  # what could not be deleted (the owner stays locked out)


def _remove_folder(folder: Path) -> None:
    lock = folder / ENGINE_LOCK
    fd = os.open(lock, os.O_RDWR) if lock.is_file() else None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OSError(errno.EBUSY, "an engine still serves this workspace") from None
        shutil.rmtree(folder)
    finally:
        if fd is not None:
            os.close(fd)


def remove(path: Path) -> None:
    """Delete a workspace folder (refused while an engine holds its lock) or an engine log."""
    if path.is_dir() and not path.is_symlink():
        _remove_folder(path)
    else:
        path.unlink(missing_ok=True)


def _remove_each(paths: Iterable[Path]) -> list[tuple[Path, OSError]]:
    """:func:`remove` each path; the ones that could not be deleted, with why."""
    failed = []
    for path in paths:
        try:
            remove(path)
        except OSError as exc:
            failed.append((path, exc))
    return failed


def _files_of(data_dir: Path, workspace_id: str) -> tuple[Path, Path]:
    return layout.workspace_dir(data_dir, workspace_id), layout.log_file(data_dir, workspace_id)


def erase_files(data_dir: Path, workspace_id: str, *extra: Path) -> list[str]:
    """Delete one workspace's folder and engine log on this node (and ``extra`` paths: a move's
    staging folder); ``"path: why"`` for each that could not be deleted."""
    failed = _remove_each((*_files_of(data_dir, workspace_id), *extra))
    return [f"{path}: {exc.strerror or type(exc).__name__}" for path, exc in failed]


def remove_files(
    store: ControlPlane, data_dir: Path, owner_id: str, workspaces: list[Workspace]
) -> list[str]:
    """Delete each workspace's folder and engine log; what failed is logged, audited as
    ``account.erase.failed`` (naming the workspace, not the path) and returned."""
    failed: list[str] = []
    for workspace in workspaces:
        for path, exc in _remove_each(_files_of(data_dir, workspace.id)):
            failed.append(str(path))
            logs.event(logs.get(), logging.ERROR, "account.erase_failed", path=str(path), error=str(exc))
            store.audit_log.record(
                "account.erase.failed",
                owner_id=owner_id,
                workspace_id=workspace.id,
                detail={"error": exc.strerror or type(exc).__name__},
            )
    return failed


def finish(store: ControlPlane, data_dir: Path, owner_id: str, workspaces: list[Workspace]) -> Erased:
    """Delete the files, then, if every one went, every row about the owner (``account.erase``)."""
    failed = remove_files(store, data_dir, owner_id, workspaces)
    if not failed:
        store.erasure.forget_owner(owner_id)
    return Erased(len(workspaces), tuple(failed))
