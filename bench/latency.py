"""Engine-side latency of ``get_context`` and ``remember`` (``perf:context-small``, ``perf:context-large``,
``perf:write``).

    python -m bench.latency [--large-chunks 100000] [--queries 200] [--keep DIR] [--write-docs]

Two workspaces: one shaped like a live one (87 notes cut into 1,845 chunks, 994 fact rows;
embedded by the real local model), and one of 100,000 chunks (document vectors from a fast
deterministic hashing embedder, so that building it takes minutes, not hours; the *query* is
still embedded by the real model, so hybrid timings include a real query embedding). Reported
beside them: raw FTS5 query time over the same index in the same run. ``remember`` at 100,000
chunks is timed against the live shape with the same hashing embedder, write for write
(:func:`interleaved_writes`), so their ratio says what the workspace's size costs a write.
With ``--keep DIR`` the large workspace is built in ``DIR`` once and reused by later runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.paths import locomo_path
from bench.sections import replace_section
from bench.starts import measure_starts
from engine.cores import one_blas_thread
from engine.embed.base import Matrix, ProviderName, ProviderStatus, Vector, l2_normalize
from engine.embed.local import DEFAULT_THREADS, LocalEmbedder
from engine.embed.remote import RemoteEmbedder
from engine.index.indexer import Indexer
from engine.index.schema import CHUNK_WEIGHTS
from engine.memory import Memory
from engine.recall.context import Recall, RecallSettings
from engine.recall.query import parse_query
from engine.scope import Caller
from engine.store.model import Note, Source
from engine.store.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
CALLER = Caller(client_name="bench")
_SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "or", "en")]


class HashDocsEmbedder:
    """Document vectors from a hash (fast, meaningless); queries from the real model (real cost)."""

    def __init__(self, real: LocalEmbedder) -> None:
        self.real = real

    @property
    def provider(self) -> ProviderName:
        return "local"

    @property
    def model_id(self) -> str:
        return "bench-hash-docs-384"

    @property
    def dim(self) -> int:
        return self.real.dim

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        seeds = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little") for t in texts]
        rows = np.stack([np.random.default_rng(s).standard_normal(self.dim) for s in seeds])
        return l2_normalize(rows.astype(np.float32))

    def embed_query(self, text: str) -> Vector:
        return self.real.embed_query(text)

    def probe(self) -> ProviderStatus:
        return ProviderStatus("local", "ready", self.model_id, self.dim)


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    words = {"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(size * 2)}
    return sorted(words)[:size]


def sentence(rng: random.Random, vocab: list[str], n: int) -> str:
    # Zipf-like: low indices are common words
    picks = [vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(n)]
    return " ".join(picks).capitalize() + "."


def note_text(rng: random.Random, vocab: list[str], chars: int) -> str:
    paragraphs, size = [], 0
    while size < chars:
        para = " ".join(sentence(rng, vocab, rng.randint(8, 20)) for _ in range(rng.randint(3, 6)))
        paragraphs.append(para)
        size += len(para) + 2
    return "\n\n".join(paragraphs)


def build(
    root: Path, embedder: Any, notes: int, chars: int, facts: int, seed: int = 7
) -> tuple[Workspace, Indexer]:
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    ws = Workspace(root)
    ws.open()
    memory = Memory(ws)
    indexer = Indexer(ws, embedder, scan_interval_s=None)
    indexer.start()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with ws.lock:
        for i in range(notes):
            created = start + timedelta(minutes=37 * i)
            note = Note(f"nte_bench{i:021d}", note_text(rng, vocab, chars), created, source=Source("bench"))
            ws.save_note(note, Path(f"{created:%Y/%m/%d}", f"{note.id}.md"))
    for i in range(facts):
        memory.save_memory(CALLER, f"{rng.choice(vocab)} {i}", rng.choice(vocab[:60]), rng.choice(vocab))
    if not indexer.wait_idle(7200):
        raise RuntimeError("indexing did not finish")
    return ws, indexer


def reopen_or_build(
    root: Path, embedder: Any, notes: int, chars: int, facts: int
) -> tuple[Workspace, Indexer, str]:
    """:func:`build`, or the workspace a ``--keep`` run left in ``root`` (reconciled by the
    indexer as an engine start does); with how it came to be, for the shape line."""
    if (root / ".index").is_dir():
        ws = Workspace(root)
        ws.open()
        indexer = Indexer(ws, embedder, scan_interval_s=None)
        indexer.start()
        if not indexer.wait_idle(7200):
            raise RuntimeError("indexing did not finish")
        return ws, indexer, f"kept from an earlier run in {root}"
    t0 = time.perf_counter()
    ws, indexer = build(root, embedder, notes, chars, facts)
    return ws, indexer, f"built and indexed in {time.perf_counter() - t0:.0f} s"


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    qs = statistics.quantiles(samples, n=100, method="inclusive")
    return round(statistics.median(samples), 2), round(qs[94], 2), round(qs[98], 2)


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def questions(path: Path | None = None, runs: int = 200) -> list[str]:
    """Natural-language questions (LoCoMo dev split, :func:`bench.paths.locomo_path` unless
    ``path``) as realistic query text; empty if absent."""
    path = path or locomo_path()
    if not path.exists():
        return []
    found = [qa["question"] for s in json.loads(path.read_text(encoding="utf-8")) for qa in s["qa"]]
    return found[:runs]


def measure(
    ws: Workspace,
    indexer: Indexer,
    runs: int,
    seed: int = 11,
    realistic: Sequence[str] = (),
    twin: Memory | None = None,
) -> tuple[dict[str, tuple[float, float, float]], list[str]]:
    """The timed rows, and what was checked on the way (the fast path's answers are the plain
    path's: see :func:`same_answers`). With ``twin``, ``remember`` is timed write for write
    against it (:func:`interleaved_writes`; its row is :data:`TWIN_ROW`)."""
    rng = random.Random(seed)
    texts = [r.note.body for r in ws.notes.values()]
    queries = []
    for _ in range(runs):
        words = rng.choice(texts).split()
        at = rng.randrange(max(len(words) - 6, 1))
        queries.append(" ".join(words[at : at + rng.randint(3, 6)]).strip(".,"))
    # every timed hybrid call embeds its query: the recent-queries cache is timed on its own row
    hybrid = Recall(indexer, RecallSettings(recent_queries=0))
    keyword = Recall(indexer, RecallSettings(semantic=False))
    memory = Memory(ws)
    counter = iter(range(10**9))
    for q in queries[:10]:  # warm up caches and the model
        hybrid.get_context(CALLER, q)
    out: dict[str, tuple[float, float, float]] = {}
    checks = []
    for label, qs in (("", queries), (" — questions", list(realistic))):
        if qs:
            out.update(_searches(indexer, keyword, hybrid, qs, label))
            same = same_answers(indexer, qs)
            checks.append(
                f"hybrid get_context answers{label or ' — synthetic'}: {same} of {len(qs)} replies identical "
                "with the fast path (embedding overlapped, recent query vectors kept) and the plain one"
            )
    if twin is None:
        out[REMEMBER] = percentiles(
            timed(lambda: memory.remember(CALLER, f"latency probe {next(counter)} {rng.random()}"), runs)
        )
    else:
        here, there = interleaved_writes(memory, twin, runs, rng)
        out[REMEMBER], out[TWIN_ROW] = percentiles(here), percentiles(there)
    return out, checks


REMEMBER = "remember (durable note + FTS rows)"
#: The live-shaped workspace's ``remember``, same embedder as the large one, timed between its writes.
TWIN_ROW = "live shape, same embedder: remember (writes interleaved)"


def interleaved_writes(
    memory: Memory, twin: Memory, runs: int, rng: random.Random
) -> tuple[list[float], list[float]]:
    """``runs`` timed ``remember`` calls on each of ``memory`` and ``twin``, alternating (which goes
    first alternates too), so that both see the same load."""
    here: list[float] = []
    there: list[float] = []
    for i in range(runs):
        pair = ((memory, here), (twin, there))
        for mem, out in pair if i % 2 else pair[::-1]:
            text = f"latency probe {id(mem)} {i} {rng.random()}"
            out += timed(partial(mem.remember, CALLER, text), 1)
    return here, there


def same_answers(indexer: Indexer, qs: Sequence[str]) -> int:
    """How many of ``qs`` get the same ``get_context`` reply (every item, order and score) from
    the engine's default path as from the plain one (query embedded first, in the caller's
    thread, nothing kept); the fast path asked twice, the second time from its cache."""
    fast = Recall(indexer)
    plain = Recall(indexer, RecallSettings(overlap_embedding=False, recent_queries=0))
    same = 0
    for q in qs:
        first, second = fast.get_context(CALLER, q), fast.get_context(CALLER, q)
        reference = plain.get_context(CALLER, q)
        same += first == reference and second == reference
    return same


def _searches(
    indexer: Indexer, keyword: Recall, hybrid: Recall, qs: list[str], label: str
) -> dict[str, tuple[float, float, float]]:
    n = len(qs)
    ft, it = iter([parse_query(q).fts for q in qs]), iter(qs * 2)
    repeated = Recall(indexer)  # the engine's default: recent query vectors kept
    again: list[float] = []
    for q in qs:  # each question asked twice in a row; the second time is timed
        repeated.get_context(CALLER, q)
        again += timed(partial(repeated.get_context, CALLER, q), 1)
    return {
        f"FTS5 query alone (raw, top 100){label}": percentiles(
            timed(lambda: indexer.db.reader.fts("chunks", next(ft), CHUNK_WEIGHTS, 100), n)
        ),
        f"get_context keyword{label}": percentiles(timed(lambda: keyword.get_context(CALLER, next(it)), n)),
        f"get_context hybrid (query embedding included){label}": percentiles(
            timed(lambda: hybrid.get_context(CALLER, next(it)), n)
        ),
        f"get_context hybrid, a repeated query (vector from recent queries){label}": percentiles(again),
    }


def embedding_hop(qs: Sequence[str], threads: int = DEFAULT_THREADS) -> dict[str, tuple[float, float, float]]:
    """One query embedding in-process, and through the host embedder service over its Unix socket
    (``python -m engine.embed``, a real process, the same model and threads): what the hosted
    shape adds to a hybrid ``get_context``. Alternating calls, same texts."""
    local = LocalEmbedder(threads=threads)
    with tempfile.TemporaryDirectory(prefix="almanac-embedder-") as tmp:
        sock = Path(tmp, "embed.sock")
        service = subprocess.Popen(
            [sys.executable, "-m", "engine.embed", "--socket", str(sock), "--threads", str(threads)],
            stdout=subprocess.DEVNULL,
        )
        try:
            with RemoteEmbedder(sock) as remote:
                deadline = time.monotonic() + 120
                while not remote.healthy():
                    if service.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the embedder service did not start")
                    time.sleep(0.05)
                for q in qs[:10]:
                    local.embed_query(q)
                    remote.embed_query(q)
                inproc: list[float] = []
                hop: list[float] = []
                for q in qs:
                    inproc += timed(partial(local.embed_query, q), 1)
                    hop += timed(partial(remote.embed_query, q), 1)
        finally:
            service.terminate()
            service.wait(30)
    return {
        "query embedding alone, in-process": percentiles(inproc),
        "query embedding alone, through the host embedder service (Unix socket)": percentiles(hop),
    }


Targets = tuple[tuple[str, float], ...]
#: SPEC §13: (operation name prefix, p50 target in ms) per workspace.
LIVE_TARGETS: Targets = (
    ("get_context keyword", 5.0),
    ("get_context hybrid (query embedding included)", 10.0),
    ("remember", 5.0),
)
LARGE_TARGETS: Targets = (
    ("get_context keyword", 50.0),
    ("get_context hybrid (query embedding included)", 50.0),
    ("remember", 5.0),
)


def render(title: str, shape: str, rows: dict[str, tuple[float, float, float]], targets: Targets = ()) -> str:
    """A table; ``× FTS5`` is each p50 over the raw FTS5 p50 of the same query set, same run;
    ``met?`` compares a p50 with its target (none: a row the spec sets no target for)."""
    head = "| operation | p50 ms | p95 ms | p99 ms | p50 × raw FTS5 | target p50 | met? |"
    lines = [f"### {title}", "", shape, "", head, "|---|---|---|---|---|---|---|"]
    for name, (p50, p95, p99) in rows.items():
        if name == TWIN_ROW:
            continue
        label = name.split(" — ")[1] if " — " in name else ""
        base = rows.get("FTS5 query alone (raw, top 100)" + (f" — {label}" if label else ""))
        ratio = f"{p50 / base[0]:.2f}" if base and base[0] > 0 and name.startswith(("FTS5", "get_")) else ""
        target = next((ms for prefix, ms in targets if name.startswith(prefix)), None)
        goal = "" if target is None else f"≤ {target:g} ms"
        met = "" if target is None else ("yes" if p50 <= target else "**no**")
        lines.append(f"| {name} | {p50} | {p95} | {p99} | {ratio} | {goal} | {met} |")
    if TWIN_ROW in rows and REMEMBER in rows:
        live, large = rows[TWIN_ROW][0], rows[REMEMBER][0]
        times = large / live if live > 0 else float("inf")
        lines += [
            "",
            "| remember, both workspaces' vectors from the hashing embedder, writes interleaved "
            "| live shape p50 ms | this workspace p50 ms | × live shape | target | met? |",
            "|---|---|---|---|---|---|",
            f"| remember (durable note + FTS rows) | {live} | {large} | {times:.2f} | ≤ {WRITE_RATIO:g}× "
            f"| {'yes' if times <= WRITE_RATIO else '**no**'} |",
        ]
    return "\n".join(lines) + "\n"


#: ``remember`` at 100,000 chunks within this many times its p50 at the live shape.
WRITE_RATIO = 2.0


STARTS_TITLE = "Starting the large workspace"
STARTS_SHAPE = (
    "The same workspace opened as an engine opens it (`bench/starts.py`): the store loaded "
    "(`Workspace.open`: every file read; each YAML block parsed unless the memo in "
    "`.cache/store-yaml.json` holds its text — `docs/store-format.md`), the index opened "
    "(`Indexer(...)`: after a stop that was not clean it reads every page, `PRAGMA quick_check`), "
    "the rows compared with the store (in the engine "
    "a thread, while calls are answered; after a clean stop whose mark still holds, skipped — "
    "`docs/recall.md`). Wall seconds; CPU is the process's for all three. The first call can "
    "be answered once the store and the index are open (`perf:cold-start`, ≤ 1 s)."
)

KEPT = "Not re-run by this command (`--large-chunks 0`): the rows of an earlier run, as they were."


def earlier_table(
    text: str, live: bool
) -> tuple[str, str, dict[str, tuple[float, float, float]], str] | None:
    """The title, shape line, rows and "not re-run" note (:data:`KEPT` when it had none) of the
    live-shaped or the large table in this bench's section of ``text`` (the docs), or None."""
    if START not in text or END not in text:
        return None
    lines = text.split(START, 1)[1].split(END, 1)[0].splitlines()
    for i, line in enumerate(lines):
        if line.startswith("### get_context and remember — ") and ("live-shaped" in line) == live:
            shape = next((x for x in lines[i + 1 :] if x.strip()), "")
            rows: dict[str, tuple[float, float, float]] = {}
            note = next((x for x in lines[i + 1 :] if x.startswith(KEPT[:20])), KEPT)
            for row in lines[i + 2 :]:
                if row.startswith("### "):
                    break
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                if row.startswith("|") and len(cells) >= 4 and cells[1].replace(".", "", 1).isdigit():
                    rows[cells[0]] = (float(cells[1]), float(cells[2]), float(cells[3]))
                elif rows and not row.startswith("|"):
                    break
            return line.removeprefix("### "), shape, rows, note
    return None


START, END = "<!-- engine-latency:start -->", "<!-- engine-latency:end -->"


def earlier_block(text: str, title: str) -> str | None:
    """The ``### title`` block of this bench's section of ``text`` as it stands (None if absent)."""
    if START not in text or END not in text:
        return None
    body = text.split(START, 1)[1].split(END, 1)[0]
    if f"### {title}" not in body:
        return None
    rest = body.split(f"### {title}", 1)[1].split("\n### ", 1)[0]
    return (f"### {title}" + rest).split(KEPT)[0].rstrip("\n") + "\n"


def write_docs(section: str, path: Path | None = None) -> None:
    """Replace only this bench's section of docs/benchmarks.md (other sections are left alone)."""
    replace_section(path or ROOT / "docs" / "benchmarks.md", START, END, section)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200, help="timed calls per operation")
    parser.add_argument("--small-notes", type=int, default=87)
    parser.add_argument("--small-chars", type=int, default=13_000, help="characters per note (≈ 21 chunks)")
    parser.add_argument("--facts", type=int, default=994)
    parser.add_argument("--large-chunks", type=int, default=100_000, help="0 to skip the large workspace")
    parser.add_argument(
        "--keep", type=Path, help="build the large workspace in this folder once, reuse it after"
    )
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args(argv)
    one_blas_thread()  # as the engine process does (engine.server.main)
    real = LocalEmbedder()
    sections = []
    with tempfile.TemporaryDirectory(prefix="almanac-latency-") as tmp:
        ws, indexer = build(Path(tmp, "small"), real, args.small_notes, args.small_chars, args.facts)
        counts = indexer.db.reader.counts()
        shape = (
            f"Live-shaped workspace: {len(ws.notes)} notes, {counts['chunks']:,} chunks, "
            f"{counts['facts']} fact rows; all embedded by the local model "
            f"(all-MiniLM-L6-v2 int8, {real.threads} thread{'s' if real.threads > 1 else ''})."
        )
        realistic = questions(runs=args.queries)
        loads = [os.getloadavg()[0]]
        rows, checks = measure(ws, indexer, args.queries, realistic=realistic)
        rows.update(embedding_hop(realistic or [f"probe query {i}" for i in range(args.queries)]))
        loads.append(os.getloadavg()[0])
        section = render("get_context and remember — live-shaped workspace", shape, rows, LIVE_TARGETS)
        sections.append(section + "\n" + "".join(f"Checked: {c}.\n" for c in checks))
        print(sections[-1])
        indexer.stop()
        ws.close()
        if args.large_chunks:
            per_note = 20
            notes = args.large_chunks // per_note
            embedder = HashDocsEmbedder(real)
            large_root = Path(args.keep or tmp, "large")
            chars = args.small_chars * per_note // 21
            ws, indexer, how = reopen_or_build(large_root, embedder, notes, chars, args.facts)
            counts = indexer.db.reader.counts()
            shape = (
                f"Large workspace: {len(ws.notes):,} notes, {counts['chunks']:,} chunks, "
                f"{counts['facts']} fact rows ({how}); document vectors from a hashing embedder, "
                "queries embedded by the real local model. `remember` is timed write for write "
                "against a live-shaped workspace whose vectors come from the same hashing embedder."
            )
            twin_ws, twin_indexer = build(
                Path(tmp, "small-hash"), embedder, args.small_notes, args.small_chars, args.facts
            )
            rows, _ = measure(ws, indexer, args.queries, realistic=realistic, twin=Memory(twin_ws))
            loads.append(os.getloadavg()[0])
            title = f"get_context and remember — {counts['chunks']:,} chunks"
            sections.append(render(title, shape, rows, LARGE_TARGETS))
            print(sections[-1])
            for done, idx in ((ws, indexer), (twin_ws, twin_indexer)):
                idx.stop()
                done.close()
            print(f"starting the {counts['chunks']:,}-chunk workspace:")
            sections.append(
                f"### {STARTS_TITLE}\n\n{STARTS_SHAPE}\n\n" + measure_starts(large_root, embedder)
            )
            print(sections[-1])
    if args.write_docs:
        docs = ROOT / "docs" / "benchmarks.md"
        kept = earlier_table(docs.read_text("utf-8"), False) if docs.exists() else None
        if kept is not None and not args.large_chunks:
            title, shape, rows, note = kept
            sections.append(render(title, shape, rows, LARGE_TARGETS) + "\n" + note + "\n")
            starts = earlier_block(docs.read_text("utf-8"), STARTS_TITLE)
            if starts:
                sections.append(starts + "\n" + KEPT + "\n")
        command = "python -m bench.latency " + " ".join(argv if argv is not None else sys.argv[1:])
        header = (
            "## Engine latency (bench/latency.py)\n\n"
            f"Produced by `{command.strip()}` on a 2-core machine, in-process (engine side, no MCP "
            "transport). Targets (SPEC §13): get_context p50 ≤ 5 ms keyword / ≤ 10 ms hybrid on the "
            "live-shaped workspace, ≤ 50 ms at 100,000 chunks; remember p50 ≤ 5 ms, durable. Two query "
            "sets: the synthetic one (3–6 consecutive words of the Zipf-worded notes: nearly every word "
            'is in most chunks, the worst case for FTS5) and "questions" (the first 200 LoCoMo dev '
            "questions, natural language; over this synthetic vocabulary they match few chunks). "
            "`× raw FTS5` is each p50 over the raw FTS5 p50 of the same query set in the same run. The "
            "100,000-chunk workspace is built through the real write path (`Workspace.save_note` with "
            "the indexer listening); only its document vectors come from a hashing embedder. There, "
            "`remember` is timed write for write against a live-shaped workspace whose vectors come "
            "from the same hashing embedder: `× live shape`, target ≤ 2×. "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average (1 min) "
            f"{min(loads):.1f}–{max(loads):.1f} over the run; `nice 10` if so run.\n\n"
        )
        write_docs(header + "\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
