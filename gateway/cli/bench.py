"""``almanac bench NAME [ARGS]…``: the benchmarks of ``bench/`` (a source checkout only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

import gateway

BENCHES = ("latency", "gateway", "locomo")


def checkout() -> Path | None:
    """The source checkout holding ``bench/``: the current directory, else the one this code is in."""
    for root in (Path.cwd(), Path(gateway.__file__).resolve().parents[1]):
        if (root / "bench" / "__init__.py").is_file():
            return root
    return None


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("name", type=click.Choice(BENCHES))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(name: str, args: tuple[str, ...]) -> None:
    """Run a benchmark: latency (engine), gateway, or locomo (retrieval quality).

    ARGS go to `python -m bench.NAME`, run from the source checkout (see `almanac bench NAME --
    --help`); results are printed as a table and, with the bench's own flag, written to
    docs/benchmarks.md."""
    root = checkout()
    if root is None:
        click.echo("error: the benchmarks live in a source checkout (bench/); run this from one", err=True)
        sys.exit(2)
    sys.exit(subprocess.call([sys.executable, "-m", f"bench.{name}", *args], cwd=root))
