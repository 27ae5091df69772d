"""Control-plane calls on SQLite and on PostgreSQL: what each database adds to a gateway request.

Times the calls the gateway makes per request or per sign-in through the real ``ControlPlane``:
``authenticate`` (a bearer token, every /mcp call), ``touch`` (its last-used write),
``session_by_secret`` (every signed-in page) and ``create_pat`` (a write transaction with an audit
row). SQLite is a fresh file; PostgreSQL is ``--database-url``, else a throw-away local server
started the way the tests start theirs (Debian's ``postgresql`` binaries, Unix socket).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.sections import replace_section
from gateway.control.store import ControlPlane

SECTION = "control-plane"
START, END = f"<!-- {SECTION}:start -->", f"<!-- {SECTION}:end -->"


def _timed(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """(p50, p95) of ``calls`` runs of ``fn``, in milliseconds (after a few untimed ones)."""
    for _ in range(5):
        fn()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.95))]


def measure(store: ControlPlane, calls: int) -> dict[str, tuple[float, float]]:
    owner, ws = store.owners.create(f"bench-{time.time_ns()}@bench.example", None)
    connection, secret = store.connections.create_pat(owner.id, ws.id, "bench")
    _, cookie = store.accounts.create_session(
        owner.id, max_age=3600, remote=None, user_agent=None, method="bench"
    )
    names = iter(range(10**9))
    figures = {
        "authenticate": _timed(lambda: store.connections.authenticate(secret), calls),
        "touch": _timed(lambda: store.connections.touch(connection.id), calls),
        "session_by_secret": _timed(lambda: store.accounts.session_by_secret(cookie), calls),
        "create_pat": _timed(lambda: store.connections.create_pat(owner.id, ws.id, f"t{next(names)}"), calls),
    }
    assert store.connections.authenticate(secret) is not None  # the timed calls did real work
    return figures


def table(rows: dict[str, dict[str, tuple[float, float]]], calls: int, where: str) -> str:
    kinds = list(rows)
    lines = [
        "## Control plane: SQLite and PostgreSQL",
        "",
        f"`python -m bench.control --calls {calls}` — {calls} timed calls each, through the real",
        f"`ControlPlane`, one thread; PostgreSQL {where}; load average {os.getloadavg()[0]:.1f} on",
        f"{os.cpu_count()} cores when it finished. Milliseconds, p50 / p95.",
        "",
        "| call | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for op in rows[kinds[0]]:
        cells = [f"{rows[k][op][0]:.3f} / {rows[k][op][1]:.3f}" for k in kinds]
        lines.append(f"| `{op}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace this benchmark's marked section of ``path`` (or append it), leaving the others alone."""
    replace_section(path, START, END, section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.control", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per figure")
    parser.add_argument("--database-url", default=None, help="PostgreSQL to measure (default: a local one)")
    parser.add_argument(
        "--out", type=Path, default=Path("docs/benchmarks.md"), help="Markdown file to update"
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="almanac-bench-control-") as tmp:
        sqlite = ControlPlane.open(Path(tmp) / "control.db")
        try:
            rows["SQLite (file, WAL)"] = measure(sqlite, args.calls)
        finally:
            sqlite.close()
    server = None
    url = args.database_url
    if url is None:
        from tests.pg import PostgresServer  # a source checkout's test helper

        server = PostgresServer.start()
        url = server.create_database()
    try:
        pg = ControlPlane.open_url(url)
        try:
            rows["PostgreSQL"] = measure(pg, args.calls)
        finally:
            pg.close()
    finally:
        if server is not None:
            server.stop()
    where = "given by --database-url" if args.database_url else "local, over a Unix socket, fsync off"
    section = table(rows, args.calls, where)
    print(section)
    if not args.no_write:
        write_section(args.out, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
