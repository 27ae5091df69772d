"""A node's volume identity (``run:scale-out``): the file ``volume-id`` in its data directory, a
random identity written at the node's first start and recorded in the control plane
(``nodes.volume_id``), so a node started on a data directory that is not its own — an empty volume (a
new disk, a wrong mount) or another node's (swapped) — is caught before it serves a workspace empty.

:func:`decide` is the rule; :func:`read_identity` and :func:`write_identity` the file. A node found on
a volume not its own keeps running (it registers and beats, so ``almanac node list`` shows it) but
serves nothing placed on it and takes nothing new (:func:`gateway.cluster.placement.route`), and
nothing is written on that volume, until it is started again on its own.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import DataDirError

#: The identity file, at the top of the data directory.
VOLUME_FILE = "volume-id"
_MAX_BYTES = 256


@dataclass(frozen=True)
class Verdict:
    adopt: bool  # record the volume's identity as the node's own (writing one first if it has none)
    reason: str  # what was decided, for the log


def decide(recorded: str | None, found: str | None, placed: int) -> Verdict:
    """Whether a node whose control-plane row records ``recorded`` may take the volume holding
    ``found`` (None: the volume has no identity) as its own, with ``placed`` workspaces on it."""
    if found is not None and found == recorded:
        return Verdict(True, "its own volume")
    if recorded is None:
        return Verdict(True, "first start with a volume identity")
    if placed == 0:
        return Verdict(True, "nothing placed on it: nothing can be served empty")
    what = "an empty volume (no identity)" if found is None else f"another volume ({found})"
    return Verdict(False, f"{what}, not its own ({recorded}), with {placed} workspace(s) placed on it")


def read_identity(data_dir: Path) -> str | None:
    """The identity in ``data_dir``, or None when it has none. A file that is not one identity
    (empty, too long, not text) is refused: the operator looks at it."""
    path = data_dir / VOLUME_FILE
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DataDirError(f"cannot read {path} ({exc.strerror}); fix its permissions") from None
    text = raw.decode("ascii", errors="replace").strip()
    if not text or len(raw) > _MAX_BYTES or not all(c.isalnum() or c == "-" for c in text):
        raise DataDirError(
            f"{path} is not a volume identity (one line of letters, digits and '-'); it is written at a "
            "node's first start and must not be edited — restore it, or move the data directory aside"
        )
    return text


def write_identity(data_dir: Path) -> str:
    """Write a new identity into ``data_dir`` durably (the file and its directory fsynced) and
    return it. Never replaces one already there."""
    identity = secrets.token_hex(16)
    path = data_dir / VOLUME_FILE
    temp = data_dir / f".{VOLUME_FILE}.tmp"
    try:
        with temp.open("w", encoding="ascii") as f:
            f.write(identity + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(temp, path)  # fails if one appeared meanwhile: never replaced
        temp.unlink()
        fd = os.open(data_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise DataDirError(
            f"cannot write {path} ({exc.strerror}); fix the data directory's permissions"
        ) from None
    return identity
