"""docs/cli.md is the CLI's --help, current (run:cli)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.cli.reference import commands, render

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.req("run:cli")
def test_docs_cli_md_is_current() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert text == render(main), "docs/cli.md is stale: run `make docs`"
    for path in commands(main):
        assert f"## `{' '.join(('almanac', *path))}`" in text


@pytest.mark.req("run:cli")
def test_every_command_the_spec_names_exists() -> None:
    paths = set(commands(main))
    for path in [
        ("serve",),
        ("owner", "create"),
        ("token", "create"),
        ("token", "list"),
        ("token", "revoke"),
        ("workspace", "list"),
        ("workspace", "usage"),
        ("engine", "reindex"),
        ("engine", "doctor"),
        ("bench",),
    ]:
        assert path in paths, path


@pytest.mark.req("run:cli")
def test_bench_passes_its_arguments_to_the_benchmark() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "almanac"), "bench", "latency", "--", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "python -m bench.latency" in result.stdout
