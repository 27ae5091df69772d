"""How long a workspace takes to start: the store loaded, the index opened, the rows compared.

Used by :mod:`bench.latency` on its 100,000-chunk workspace, after the clean stop that ends its
measurements. Each start is timed in parts, in-process (the engine's own start does the same
three steps): ``Workspace.open`` (every Markdown file read and parsed), ``Indexer(...)`` (the
index opened and checked) and ``Indexer.start`` (the start-up comparison of every row with the
store, run here in the foreground: in the engine it runs in a thread while calls are answered).
Starts after a clean stop (the index carries its mark) are set against a start without the
store's YAML memo (``.cache/store-yaml.json``: deleted, or written by another YAML library) and a start whose
mark was taken away first — the same as after a crash or a version change — in the same run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from engine.index.db import CLEAN_MARK
from engine.index.indexer import INDEX_DIR, INDEX_FILE, Indexer
from engine.store.layout import CACHE, MEMO_NAME
from engine.store.workspace import Workspace

#: SPEC §13 ``perf:cold-start``: a sleeping workspace answers its first call within this.
COLD_START_S = 1.0

Parts = dict[str, float]


def one_start(root: Path, embedder: Any) -> Parts:
    """Open ``root`` as the engine does and stop it cleanly; seconds per part (wall) and CPU."""
    c0, t0 = time.process_time(), time.perf_counter()
    ws = Workspace(root)
    ws.open()
    t1 = time.perf_counter()
    indexer = Indexer(ws, embedder, scan_interval_s=None)
    t2 = time.perf_counter()
    indexer.start(background=False)
    t3 = time.perf_counter()
    cpu = time.process_time() - c0
    indexer.stop()
    ws.close()
    return {"store": t1 - t0, "index": t2 - t1, "compare": t3 - t2, "total": t3 - t0, "cpu": cpu}


def take_mark(root: Path) -> None:
    """What a stop that is not clean leaves: no mark."""
    con = apsw.Connection(str(root / INDEX_DIR / INDEX_FILE))
    try:
        con.execute("DELETE FROM meta WHERE key = ?", (CLEAN_MARK,))
    finally:
        con.close()


def measure_starts(root: Path, embedder: Any, runs: int = 3, say: Callable[[str], None] = print) -> str:
    """``runs`` starts after a clean stop, one without the YAML memo and one without the mark, as
    a Markdown table."""
    clean = []
    for i in range(runs):
        clean.append(one_start(root, embedder))
        say(f"  start after a clean stop {i + 1}/{runs}: {clean[-1]['total']:.2f} s")
    (root / CACHE / MEMO_NAME).unlink(missing_ok=True)
    unmemo = one_start(root, embedder)
    say(f"  start without the YAML memo: {unmemo['total']:.2f} s")
    take_mark(root)
    unclean = one_start(root, embedder)
    say(f"  start without the mark: {unclean['total']:.2f} s")
    median = {k: statistics.median(p[k] for p in clean) for k in clean[0]}
    lines = [
        "| start of this workspace (s) | store loaded | index opened | rows compared | total | CPU "
        "| target (first call answered) | met? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, parts in (
        (f"after a clean stop (median of {runs})", median),
        ("without the YAML memo (`.cache/` deleted, or another YAML library version), 1 run", unmemo),
        ("without the mark (after a crash or an upgrade), 1 run", unclean),
    ):
        # the first call waits for the store and the index, not for the comparison (a thread)
        ready = parts["store"] + parts["index"]
        met = "yes" if ready <= COLD_START_S else "**no**"
        lines.append(
            f"| {label} | {parts['store']:.2f} | {parts['index']:.2f} | {parts['compare']:.2f} "
            f"| {parts['total']:.2f} | {parts['cpu']:.2f} | ≤ {COLD_START_S:g} s | {met} |"
        )
    return "\n".join(lines) + "\n"
