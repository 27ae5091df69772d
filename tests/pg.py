"""A real PostgreSQL server for the tests: Debian's ``postgresql`` binaries (installed by
``scripts/test-setup``), a throw-away cluster in a temporary directory, reached only through a Unix
socket in that directory (no TCP port). One server per test session; a fresh database per test.

PostgreSQL refuses to run as root (as CI does), so then the cluster belongs to ``nobody`` and its
processes run as that user (``runuser``); the tests, as root, still reach the socket.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg

SUPERUSER = "almanac"


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError(
            "PostgreSQL server binaries are missing (/usr/lib/postgresql/*/bin/initdb); "
            "run scripts/test-setup (it installs Debian's postgresql package)"
        )
    return Path(found[-1]).parent


@dataclass
class PostgresServer:
    root: Path
    bin_dir: Path
    run_as: str | None  # an unprivileged user when the tests run as root

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket_dir), safe='')}"

    def _run(self, *argv: str) -> None:
        prefix = ("runuser", "-u", self.run_as, "--") if self.run_as else ()
        result = subprocess.run(
            (*prefix, *argv), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({result.returncode}): {result.stderr or result.stdout}"
            )

    @classmethod
    def start(cls) -> PostgresServer:
        bin_dir = _bin_dir()
        run_as = "nobody" if os.geteuid() == 0 else None
        # /tmp: every user can reach it (a root-only $TMPDIR would lock `nobody` out), and the socket
        # path stays well under the ~100-byte limit of a Unix socket's name
        root = Path(tempfile.mkdtemp(prefix="almanac-pg-", dir="/tmp" if Path("/tmp").is_dir() else None))
        server = cls(root, bin_dir, run_as)
        (root / "socket").mkdir()
        if run_as is not None:
            user = pwd.getpwnam(run_as)
            for path in (root, root / "socket"):
                os.chown(path, user.pw_uid, user.pw_gid)
        server._run(
            str(bin_dir / "initdb"),
            "-D",
            str(server.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--no-sync",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )
        server._start()
        return server

    def _start(self) -> None:
        options = (
            f"-k {self.socket_dir} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        name = f"t_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.url(name)

    def restart(self) -> None:
        """Stop the server (every connection dropped; what was committed kept) and start it again."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        self._start()

    def halt(self) -> None:
        """Stop the server (every connection dropped; what was committed kept) until :meth:`resume`."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        self._start()

    def stop(self) -> None:
        try:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
