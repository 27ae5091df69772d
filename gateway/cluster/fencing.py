"""What keeps one process to a name, and one name to a volume (``run:scale-out``; deploy/SCALING.md
"What is fenced").

- :class:`NameLock` — a node's name is held by one process at a time: a PostgreSQL session-level
  advisory lock on a hash of the name, taken at start on a connection of its own and held for the
  process's life. A second ``almanac serve`` under a live name is refused at start
  (:class:`~gateway.errors.ConfigError`: one line, exit status 2). Each heartbeat checks the
  connection; should it have died (a restart of PostgreSQL, a broken network) the lock is taken again
  on a new one — or, if another process has it, this one is fenced for good.
- :class:`Fence` — the node's own view of its leases, on the monotonic clock: it serves its
  workspaces only until ``lease`` seconds after the start of its last heartbeat that renewed them
  with its own fencing token (``nodes.generation``, moved on by every process that starts under the
  name), and not before the leases of the process it replaced have run out. A node that cannot renew
  (the control plane is down, its name was taken) admits no call for its workspaces from the end of
  its lease on — before a newer process under its name may serve (that one waits for the end of the
  lease). A call admitted before the end is let finish.
- :func:`hold_data_dir` — one ``almanac serve`` per data directory (an exclusive ``flock`` on
  ``serve.lock``, held while the process lives): with the SQLite control plane (one host, no nodes)
  that is all the fencing there is, and it is enough, since the control plane is that directory's
  own file.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gateway.control.db import redact
from gateway.errors import ConfigError, DataDirError

if TYPE_CHECKING:
    import psycopg

LockState = Literal["held", "taken", "unreachable"]

#: The lock file of a data directory's ``almanac serve``.
SERVE_LOCK = "serve.lock"

#: How long taking or checking the name's lock may wait for PostgreSQL (seconds).
LOCK_TIMEOUT_S = 3


def lock_key(name: str) -> int:
    """The advisory-lock key of node ``name``: a signed 64-bit hash, the same in every process."""
    digest = hashlib.sha256(b"almanac-node:" + name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class NodeNameTaken(ConfigError):
    """Another live process holds this node's name."""


def _connect(url: str) -> psycopg.Connection[Any]:
    import psycopg

    return psycopg.connect(
        url,
        autocommit=True,
        connect_timeout=LOCK_TIMEOUT_S,
        # a peer gone without a word (a partition) is noticed within seconds, not hours
        keepalives=1,
        keepalives_idle=5,
        keepalives_interval=2,
        keepalives_count=3,
    )


class NameLock:
    """Node ``name``'s advisory lock, held on a connection of its own for the process's life."""

    def __init__(self, url: str, name: str, conn: psycopg.Connection[Any]) -> None:
        self.url, self.name, self._conn = url, name, conn

    @classmethod
    def take(cls, url: str, name: str) -> NameLock:
        """Take the lock, or raise :class:`NodeNameTaken` (one line) if a live process holds it."""
        import psycopg

        try:
            conn = _connect(url)
            took = bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(name),)).fetchone()[0])  # type: ignore[index]
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())
            raise DataDirError(f"cannot take node {name!r}'s lock at {redact(url)}: {reason}") from None
        if not took:
            conn.close()
            raise NodeNameTaken(
                f"node {name!r} is already running: another `almanac serve` holds its name in the "
                f"control plane at {redact(url)}; stop that one first, or start this one with another --node"
            )
        return cls(url, name, conn)

    def check(self) -> LockState:
        """Whether this process still holds the name: ``held`` (its connection answers, or the lock
        was taken again on a new one), ``taken`` (another process has it now) or ``unreachable``."""
        import psycopg

        try:
            self._conn.execute("SELECT 1")
            return "held"
        except psycopg.Error:
            self._conn.close()
        try:
            conn = _connect(self.url)
        except psycopg.Error:
            return "unreachable"
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(self.name),)).fetchone()
        except psycopg.Error:
            conn.close()
            return "unreachable"
        if row is None or not row[0]:
            conn.close()
            return "taken"
        self._conn = conn
        return "held"

    def close(self) -> None:
        self._conn.close()  # the session ends: the lock goes with it


@dataclass
class Fence:
    """Whether this process may serve its workspaces now (see the module's docstring)."""

    lease: float  # placement_lease
    generation: int  # this process's fencing token
    not_before: float  # the database's clock: the previous process's leases run out then
    retry_after: float
    monotonic: Callable[[], float] = time.monotonic
    valid_until: float = field(default=-math.inf)  # monotonic
    name_taken: bool = False
    stopped: bool = False

    def record_renewal(self, began: float) -> None:
        """A heartbeat begun at ``began`` (monotonic) renewed the leases with this token."""
        self.valid_until = max(self.valid_until, began + self.lease)

    def refusal(self, now: float) -> tuple[str, float] | None:
        """Why this node may not serve its own workspaces now, and when to try again; None if it may."""
        if self.name_taken:
            return (
                "another process has started under this node's name; this one serves nothing",
                self.retry_after,
            )
        if self.stopped:
            return "this node is stopping", self.retry_after
        if now < self.not_before:
            return (
                "this node has just started again and waits for its previous process's leases to run out",
                self.not_before - now,
            )
        if self.monotonic() >= self.valid_until:
            return (
                "this node could not renew its leases with the control plane in time (it serves nothing "
                "it cannot be sure it still holds)",
                self.retry_after,
            )
        return None


def hold_data_dir(data_dir: Path) -> int:
    """Take ``data_dir``'s serve lock for this process's life (the descriptor is returned to be
    kept open; it is not inherited by the engines). Raises :class:`DataDirError` if another
    ``almanac serve`` holds it."""
    path = data_dir / SERVE_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise DataDirError(
            f"cannot open {path} ({exc.strerror}); fix the data directory's permissions"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirError(
            f"another `almanac serve` is already running on the data directory {data_dir} (it holds "
            f"{path}); stop that one first, or start this one with another --data-dir"
        ) from None
    return fd
