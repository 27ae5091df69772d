"""Rebuilding the index of a live-shaped workspace, embeddings cached (``perf:rebuild``).

    python -m bench.rebuild [--notes 87] [--chars 13000] [--facts 994] [--write-docs]

Builds the live-shaped workspace of ``bench.latency`` (embedded once by the real local model,
which fills the embedding cache in ``.cache/``), stops it, then runs the real command
``python -m engine --reindex --dir PATH`` (which deletes ``.index/`` and rebuilds it from the
Markdown, every vector from the cache) and times it: the whole process, and the rebuild alone
as the engine logs it. Target (SPEC §13): ≤ 10 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.latency import ROOT, build
from bench.sections import replace_section
from engine.embed.local import LocalEmbedder
from engine.index.indexer import CACHE_DIR, CACHE_FILE, INDEX_DIR

START, END = "<!-- engine-rebuild:start -->", "<!-- engine-rebuild:end -->"
TARGET_S = 10.0
DOCS = ROOT / "docs" / "benchmarks.md"


def reindex(root: Path) -> float:
    """Seconds of ``python -m engine --reindex`` on ``root`` (the local model, as the engine uses it)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "engine", "--reindex", "--dir", str(root)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return time.perf_counter() - started


def imports_only() -> float:
    """Seconds for an engine process to start and import what it needs (the fixed part of a reindex)."""
    started = time.perf_counter()
    code = "import engine.server, engine.embed.local, sqlite_vec, onnxruntime"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=600)
    return time.perf_counter() - started


def footprint(root: Path) -> dict[str, int]:
    """Bytes on disk of a workspace folder, by part: the Markdown store (everything but the index
    and the embedding cache), the index, the embedding cache."""
    parts = {"store": 0, "index": 0, "cache": 0}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            top = path.relative_to(root).parts[0]
            part = "index" if top == INDEX_DIR else "cache" if top == CACHE_DIR else "store"
            parts[part] += path.stat().st_size
    return parts


def render(shape: str, total: float, fixed: float, disk: dict[str, int] | None = None) -> str:
    met = "yes" if total <= TARGET_S else "no"
    rows = (
        "".join(
            f"| disk: {label} (MB) | {disk[part] / 1e6:.3f} | |\n"
            for part, label in (
                ("store", "the Markdown store"),
                ("index", "the index"),
                ("cache", "the embedding cache"),
            )
        )
        if disk
        else ""
    )
    load = os.getloadavg()[0]
    return (
        "## Index rebuild (bench/rebuild.py)\n\n"
        f"`python -m bench.rebuild --write-docs`. {shape} `python -m engine --reindex` deletes `.index/` "
        "and rebuilds it from the Markdown; every vector comes from the embedding cache in `.cache/`, "
        "which the rebuild keeps. Target (SPEC §13, `perf:rebuild`): ≤ 10 s.\n\n"
        "| measure | seconds | met? |\n|---|---|---|\n"
        f"| `python -m engine --reindex`, whole process | {total:.2f} | {met} |\n"
        f"| … of which starting Python and importing the engine | {fixed:.2f} | |\n"
        f"{rows}\n"
        f"Load average during the run: {load:.1f} on {os.cpu_count()} cores.\n\n"
    )


def write_docs(section: str, path: Path | None = None) -> None:
    replace_section(path or DOCS, START, END, section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rebuild", description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=87)
    parser.add_argument("--chars", type=int, default=13_000, help="characters per note (≈ 21 chunks)")
    parser.add_argument("--facts", type=int, default=994)
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="almanac-rebuild-") as tmp:
        root = Path(tmp, "ws")
        ws, indexer = build(root, LocalEmbedder(), args.notes, args.chars, args.facts)
        counts = indexer.db.reader.counts()
        indexer.stop()
        ws.close()
        assert (root / CACHE_DIR / CACHE_FILE).exists()
        shape = (
            f"Live-shaped workspace: {args.notes} notes, {counts['chunks']:,} chunks, "
            f"{counts['facts']} fact rows."
        )
        total = reindex(root)
        assert (root / INDEX_DIR).exists()
        disk = footprint(root)
        fixed = imports_only()
    section = render(shape, total, fixed, disk)
    print(section)
    if args.write_docs:
        write_docs(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
