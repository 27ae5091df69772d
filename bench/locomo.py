"""Retrieval quality on LoCoMo (``quality:locomo``, ``quality:honest-miss``).

    python -m bench.locomo [PATH] [--mode engine|mcp] [--layout NAME|all|checks] [--only conv-26,conv-44]
                           [--cache FILE] [--keep DIR] [--no-context] [--json OUT] [--misses OUT]
                           [--fusion default|hand|learned]

One workspace per conversation. ``--mode engine`` (default) writes each dialogue turn through
the engine's own write path (``Memory.remember``, a note, its session's date as its time);
``--mode mcp`` writes them as an agent would: one plain ``remember`` call per turn through the
real MCP client, in order, no extra metadata, the engine's own clock. Every question of
categories 1–4 is then asked through the search behind ``get_context``; the SQLite FTS5 bm25
reference runs over the same turns in the same run. The data is read from PATH (default
``$ALMANAC_LOCOMO``, else ``shared/bench/locomo/locomo10_dev.json`` in the nearest folder at or
above the checkout: :mod:`bench.paths`) and never copied.

``--layout`` words each turn differently (``quality:layouts``): ``speaker`` (``Name: text``),
``date-first``, ``third-person`` ("On 8 May 2023, Name said that …"), ``plain`` (the words
alone) and ``mix`` (one of the four per turn). FTS5 is measured over the same texts.
``get_context`` recall@10 is measured on the first ten notes it returns with the largest budget.
``--layout checks`` runs three more wordings that nothing in ranking was chosen on
(``speaker-last``, ``bracket-said``, ``wrote-quote``): a check that the five carry over.
``--fusion hand|learned`` scores the candidates by the hand-set weights or by the learned ones
(``bench/fusion_weights.json``, :mod:`bench.fit_fusion`) whatever the engine's default.
``--misses OUT`` writes every evidence turn outside a question's first ten, with its rank and
what may explain it (:mod:`bench.misses`), and prints the counts per half.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import apsw

from bench import answers, misses
from bench.learned import WEIGHTS_FILE, load_learned
from bench.paths import ENV, locomo_path
from engine.embed.base import Embedder
from engine.embed.cache import EmbeddingCache
from engine.index.indexer import Indexer
from engine.index.schema import TOKENIZE
from engine.memory import Memory
from engine.recall.context import Recall, RecallSettings
from engine.recall.query import parse_query
from engine.scope import Caller
from engine.store.workspace import Workspace

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
HALF_A = ("conv-26", "conv-44", "conv-47")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE = re.compile(r"^D(\d+):(\d+)$")
CALLER = Caller(client_name="locomo")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    said: str  # the words, with " [shares <caption>]" when an image was shared
    when: datetime
    layout: str = "speaker"
    key: str = ""  # seeds the per-turn choice of the mix layout

    @property
    def text(self) -> str:
        """The memory as written in this turn's layout (``quality:layouts``)."""
        return render(self.layout, self.speaker, self.said, self.when, self.key or self.dia_id)


#: How a memory of one turn is worded. Each is a plausible way an agent writes what was said.
LAYOUTS = ("speaker", "date-first", "third-person", "plain", "mix")
#: More wordings, never used to choose anything in ranking: a check that what the five above
#: measure carries over (``--layout checks``). The speaker after the words; a bracketed ISO date
#: and "said:"; "wrote:" and the words quoted.
CHECKS = ("speaker-last", "bracket-said", "wrote-quote")
KNOWN = LAYOUTS + CHECKS
#: Each layout but ``mix`` as a template (``said`` is a value, never read as one).
WORDINGS = {
    "speaker": "{speaker}: {said}",
    "date-first": "{day} — {speaker}: {said}",
    "third-person": "On {day}, {speaker} said that {said}",
    "plain": "{said}",
    "speaker-last": "{said} ({speaker}, {day})",
    "bracket-said": "[{iso}] {speaker} said: {said}",
    "wrote-quote": '{speaker} wrote: "{said}"',
}


def _day(when: datetime) -> str:
    return f"{when.day} {when:%B} {when.year}"


def render(layout: str, speaker: str, said: str, when: datetime, key: str) -> str:
    """One turn in ``layout``: ``Name: text``; the date in front; a third-person sentence with
    the date; the words alone; or, for ``mix``, one of those four chosen per turn (seeded by
    ``key``, so every run writes the same texts)."""
    if layout == "mix":
        pick = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 4
        layout = LAYOUTS[pick]
    template = WORDINGS.get(layout)
    if template is None:
        raise ValueError(f"unknown layout {layout!r}: use one of {', '.join(KNOWN)}")
    return template.format(speaker=speaker, said=said, day=_day(when), iso=f"{when:%Y-%m-%d}")


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]
    answer: str = ""  # LoCoMo's answer (bench.answers)


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


def parse_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware datetime (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def normalise_evidence(raw: Sequence[str], known: set[str]) -> tuple[str, ...]:
    """``"D8:6; D9:17"`` → two ids; leading zeros dropped; ids matching no turn dropped."""
    out: list[str] = []
    for item in raw:
        for piece in _EVIDENCE_SPLIT.split(str(item)):
            match = _EVIDENCE.match(piece.replace("D:", "D"))
            if match:
                dia = f"D{int(match.group(1))}:{int(match.group(2))}"
                if dia in known and dia not in out:
                    out.append(dia)
    return tuple(out)


def load(path: Path, layout: str = "speaker") -> list[Conversation]:
    if layout not in KNOWN:
        raise ValueError(f"unknown layout {layout!r}: use one of {', '.join(KNOWN)}")
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in conv:
            when = parse_date(conv[f"session_{n}_date_time"])
            for i, turn in enumerate(conv[f"session_{n}"]):
                said = turn["text"]
                if turn.get("blip_caption"):
                    said += f" [shares {turn['blip_caption']}]"
                at = when + timedelta(seconds=20 * i)
                key = f"{sample['sample_id']}/{turn['dia_id']}"
                turns.append(Turn(turn["dia_id"], turn["speaker"], said, at, layout, key))
            n += 1
        known = {t.dia_id for t in turns}
        questions = []
        for qa in sample["qa"]:
            if qa.get("category") in CATEGORIES:
                evidence = normalise_evidence(qa.get("evidence", []), known)
                if evidence:
                    answer = str(qa.get("answer", ""))
                    questions.append(Question(qa["question"], int(qa["category"]), evidence, answer))
        out.append(Conversation(sample["sample_id"], turns, questions))
    return out


# -- metrics -------------------------------------------------------------------------------------


def scores(ranked: Sequence[str], evidence: Sequence[str]) -> tuple[float, float, float, float]:
    """recall@5, recall@10, MRR, NDCG@10 of a ranked list of turn ids."""
    wanted = set(evidence)
    r5 = len(wanted & set(ranked[:5])) / len(wanted)
    r10 = len(wanted & set(ranked[:10])) / len(wanted)
    mrr = next((1.0 / (i + 1) for i, d in enumerate(ranked) if d in wanted), 0.0)
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(wanted), 10)))
    return r5, r10, mrr, dcg / ideal


@dataclass
class Tally:
    rows: list[tuple[int, tuple[float, float, float, float]]] = field(default_factory=list)

    def add(self, category: int, values: tuple[float, float, float, float]) -> None:
        self.rows.append((category, values))

    def summary(self) -> dict[str, float]:
        def mean(vals: list[float]) -> float:
            return round(100 * sum(vals) / len(vals), 1) if vals else 0.0

        out = {
            name: mean([v[i] for _, v in self.rows])
            for i, name in enumerate(("R@5", "R@10", "MRR", "NDCG@10"))
        }
        for cat in CATEGORIES:
            out[f"c{cat}"] = mean([v[1] for c, v in self.rows if c == cat])
        out["n"] = len(self.rows)
        return out


# -- building the workspaces ---------------------------------------------------------------------


@dataclass
class Built:
    conv: Conversation
    workspace: Workspace
    indexer: Indexer
    dia_of: dict[str, list[str]]  # memory id → the turns it holds


def build_engine(conv: Conversation, root: Path, embedder: Embedder, cache: EmbeddingCache) -> Built:
    ws = Workspace(root)
    ws.open()
    clock = [conv.turns[0].when]
    memory = Memory(ws, clock=lambda: clock[0])
    indexer = Indexer(ws, embedder, cache=cache, scan_interval_s=None)
    indexer.start()
    dia_of: dict[str, list[str]] = {}
    caller = CALLER
    for turn in conv.turns:
        clock[0] = turn.when
        receipt = memory.remember(caller, turn.text)
        dia_of.setdefault(receipt.id, []).append(turn.dia_id)
    return Built(conv, ws, indexer, dia_of)


def build_mcp(conv: Conversation, root: Path, embedder: Embedder, cache: EmbeddingCache) -> Built:
    from mcp import Client

    from engine.tools import build_server

    ws = Workspace(root)
    ws.open()
    indexer = Indexer(ws, embedder, cache=cache, scan_interval_s=None)
    indexer.start()
    server = build_server(Memory(ws), recall=Recall(indexer))
    dia_of: dict[str, list[str]] = {}

    async def write() -> None:
        async with Client(server) as client:
            for turn in conv.turns:
                result = await client.call_tool("remember", {"statement": turn.text})
                assert not result.is_error, result
                receipt: Any = result.structured_content
                dia_of.setdefault(receipt["id"], []).append(turn.dia_id)

    anyio.run(write)
    return Built(conv, ws, indexer, dia_of)


def ranked_turns(recall: Recall, built: Built, question: str, qvec: Any, limit: int = 10) -> list[str]:
    searched = recall.search(question, limit=limit, qvec=qvec)
    out: list[str] = []
    for hit in searched.hits:
        if hit.reason != "graph":
            out.extend(built.dia_of.get(hit.memory, []))
    return out


def fts_reference(
    conv: Conversation,
) -> list[tuple[int, tuple[float, float, float, float], answers.AnswerCheck | None]]:
    """SQLite FTS5 bm25 over the same turns: porter, stop-word-filtered OR query; each question's
    category, scores and answer check (:mod:`bench.answers`)."""
    db = apsw.Connection(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(dia UNINDEXED, text, tokenize='{TOKENIZE}')")
    db.executemany("INSERT INTO t VALUES (?, ?)", [(t.dia_id, t.text) for t in conv.turns])
    words = misses.Stems([(t.dia_id, t.said) for t in conv.turns])
    out = []
    for q in conv.questions:
        expr = parse_query(q.text).fts
        rows = db.execute("SELECT dia FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10", (expr,)).fetchall()
        ranked = [str(r[0]) for r in rows]
        values = scores(ranked, q.evidence)
        out.append(
            (q.category, values, answers.check(q.answer, words.holding, q.evidence, ranked, values[1]))
        )
    return out


def context_reply(recall: Recall, question: str) -> dict[str, Any]:
    """``get_context`` with the largest budget."""
    return recall.get_context(CALLER, question, max_tokens=recall.settings.max_tokens_limit)


def context_turns(built: Built, reply: dict[str, Any], limit: int = 10) -> list[str]:
    """The turns of the first ``limit`` notes of a ``get_context`` reply, in its order."""
    out: list[str] = []
    for note in reply["notes"][:limit]:
        out.extend(built.dia_of.get(note["id"], []))
    return out


def query_vectors(built: list[Built], settings: RecallSettings) -> dict[tuple[int, str], Any]:
    """Each question's query vector as the search in workspace ``i`` embeds it (its own
    conversation's and the next one's, which the honest-miss check asks), keyed ``(i, text)``."""
    recalls = [Recall(b.indexer, settings) for b in built]
    out: dict[tuple[int, str], Any] = {}
    for i, b in enumerate(built):
        for q in b.conv.questions:
            for j in dict.fromkeys((i, (i + 1) % len(built))):
                if (j, q.text) not in out:
                    out[j, q.text] = recalls[j].query_vector(q.text)
    return out


def evaluate(
    built: list[Built], settings: RecallSettings, qvecs: dict[tuple[int, str], Any], *, context: bool = True
) -> dict[str, Any]:
    """Quality of every question against its own conversation, and honest-miss rates; with
    ``context``, also recall@10 of what ``get_context`` returns. ``qvecs``: :func:`query_vectors`."""
    halves = {"A": Tally(), "B": Tally(), "all": Tally(), "get_context": Tally()}
    held = answers.AnswerTally()  # does the first ten hold the answer's words (bench.answers)
    own_true = wrong_false = asked = 0
    own_listed = wrong_listed = wrong_empty = 0  # get_context's items (facts and notes)
    for i, b in enumerate(built):
        recall = Recall(b.indexer, settings)
        j = (i + 1) % len(built)
        other = Recall(built[j].indexer, settings)
        words = misses.Stems([(t.dia_id, t.said) for t in b.conv.turns])
        for q in b.conv.questions:
            ranked = ranked_turns(recall, b, q.text, qvecs.get((i, q.text)))
            values = scores(ranked, q.evidence)
            held.add(q.category, answers.check(q.answer, words.holding, q.evidence, ranked[:10], values[1]))
            halves["all"].add(q.category, values)
            halves["A" if b.conv.sample_id in HALF_A else "B"].add(q.category, values)
            if context:
                reply = context_reply(recall, q.text)
                halves["get_context"].add(q.category, scores(context_turns(b, reply), q.evidence))
                own_listed += len(reply["facts"]) + len(reply["notes"])
                if len(built) > 1:
                    miss = context_reply(other, q.text)
                    wrong_listed += len(miss["facts"]) + len(miss["notes"])
                    wrong_empty += not (miss["facts"] or miss["notes"])
            asked += 1
            own_true += recall.search(q.text, limit=10, qvec=qvecs.get((i, q.text))).relevant
            if len(built) > 1:
                wrong_false += not other.search(q.text, limit=10, qvec=qvecs.get((j, q.text))).relevant
    result: dict[str, Any] = {k: v.summary() for k, v in halves.items()}
    result["answers"] = held.summary(CATEGORIES)
    result["honest_miss"] = {
        "own_relevant_true": round(100 * own_true / max(asked, 1), 1),
        "wrong_relevant_false": round(100 * wrong_false / max(asked, 1), 1) if len(built) > 1 else None,
    }
    if context:  # what get_context lists: asked of the question's own conversation, and of another
        result["listed"] = {
            "own": round(own_listed / max(asked, 1), 2),
            "wrong": round(wrong_listed / max(asked, 1), 2) if len(built) > 1 else None,
            "wrong_empty": round(100 * wrong_empty / max(asked, 1), 1) if len(built) > 1 else None,
        }
    return result


def miss_analysis(
    built: list[Built], settings: RecallSettings, qvecs: dict[tuple[int, str], Any]
) -> dict[str, Any]:
    """:mod:`bench.misses` over every conversation: counts per half and every miss."""
    out: dict[str, Any] = {}
    for half in ("A", "B"):
        found: list[misses.Miss] = []
        total = questions = 0
        for i, b in enumerate(built):
            if (b.conv.sample_id in HALF_A) != (half == "A"):
                continue
            recall = Recall(b.indexer, settings)
            said = [(t.dia_id, t.said) for t in b.conv.turns]
            asked = [(q.text, q.category, q.evidence) for q in b.conv.questions]
            total += sum(len(q.evidence) for q in b.conv.questions)
            questions += len(b.conv.questions)

            def rank(text: str, recall: Recall = recall, b: Built = b, i: int = i) -> list[str]:
                return ranked_turns(recall, b, text, qvecs.get((i, text)), limit=misses.DEEP)

            found += misses.analyse(b.conv.sample_id, said, asked, rank)
        out[half] = {"summary": misses.summary(found, total, questions), "misses": misses.records(found)}
    return out


def table(rows: dict[str, dict[str, float]]) -> str:
    cols = ["R@5", "R@10", "MRR", "NDCG@10", "c1", "c2", "c3", "c4", "n"]
    lines = ["| method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, summary in rows.items():
        lines.append(f"| {name} | " + " | ".join(str(summary.get(c, "")) for c in cols) + " |")
    return "\n".join(lines)


def reopen(conv: Conversation, root: Path, embedder: Embedder, cache: EmbeddingCache) -> Built | None:
    """A workspace a previous run built and kept (``--keep``), opened as it is; None if there is none."""
    saved = root / "dia_of.json"
    if not saved.exists():
        return None
    ws = Workspace(root)
    ws.open()
    indexer = Indexer(ws, embedder, cache=cache, scan_interval_s=None)
    indexer.start()
    return Built(conv, ws, indexer, json.loads(saved.read_text(encoding="utf-8")))


def build_all(
    convs: list[Conversation],
    root: Path,
    mode: str,
    embedder: Embedder,
    cache: EmbeddingCache,
    *,
    keep: bool = False,
) -> list[Built]:
    builder = build_mcp if mode == "mcp" else build_engine
    built = []
    for conv in convs:
        t0 = time.perf_counter()
        where = root / conv.sample_id
        b = (reopen(conv, where, embedder, cache) if keep else None) or builder(conv, where, embedder, cache)
        if keep:
            (where / "dia_of.json").write_text(json.dumps(b.dia_of), encoding="utf-8")
        if not b.indexer.wait_idle(1800):
            raise RuntimeError(f"indexing {conv.sample_id} did not finish")
        print(
            f"  {conv.sample_id}: {len(conv.turns)} turns in {time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )
        built.append(b)
    return built


def bench_settings(args: argparse.Namespace) -> RecallSettings:
    """The recall settings of a run: the engine's, with ``--floor`` and ``--fusion`` applied."""
    settings = RecallSettings() if args.floor is None else RecallSettings(match_floor=args.floor)
    if args.fusion == "default":
        return settings
    learned = load_learned(args.fusion_weights) if args.fusion == "learned" else None
    return replace(settings, weights=replace(settings.weights, learned=learned))


def run_layout(args: argparse.Namespace, layout: str, embedder: Any) -> dict[str, Any]:
    """Build every conversation's workspace in ``layout`` and measure it (and FTS5 on the same texts)."""
    convs = load(args.path, layout)
    if args.only:
        convs = [c for c in convs if c.sample_id in args.only.split(",")]
    if args.limit_turns:
        for c in convs:
            c.turns = c.turns[: args.limit_turns]
            known = {t.dia_id for t in c.turns}
            c.questions = [q for q in c.questions if set(q.evidence) <= known]
    with tempfile.TemporaryDirectory(prefix="almanac-locomo-") as tmp:
        cache = EmbeddingCache(args.cache or Path(tmp) / "embeddings.sqlite")
        root = Path(tmp) if args.keep is None else args.keep / f"{args.mode}-{layout}"
        built = build_all(convs, root, args.mode, embedder, cache, keep=args.keep is not None)
        t0 = time.perf_counter()
        settings = bench_settings(args)
        qvecs = query_vectors(built, settings)
        embed_ms = (time.perf_counter() - t0) * 1000 / max(len(qvecs), 1)
        t1 = time.perf_counter()
        result = evaluate(built, settings, qvecs, context=not args.no_context)
        result["match_floor"] = settings.match_floor
        if args.misses:
            result["misses"] = miss_analysis(built, settings, qvecs)
        calls = 3 + (0 if args.no_context else 1)
        result["ms_per_question"] = round(
            (time.perf_counter() - t1) * 1000 / max(result["all"]["n"], 1) / calls, 2
        )
        result["query_embedding_ms"] = round(embed_ms, 2)
        reference = Tally()
        reference_held = answers.AnswerTally()
        for c in convs:
            for cat, values, held in fts_reference(c):
                reference.add(cat, values)
                reference_held.add(cat, held)
        result["fts5_reference"] = reference.summary()
        result["fts5_answers"] = reference_held.summary(CATEGORIES)
        result["mode"] = args.mode
        result["layout"] = layout
        for b in built:
            b.indexer.stop()
            b.workspace.close()
        cache.close()
    return result


def report(result: dict[str, Any]) -> str:
    name = f"almanac ({result['mode']}, {result['layout']})"
    rows = {name: result["all"], "FTS5 bm25 reference (same texts)": result["fts5_reference"]}
    rows["almanac, half A"] = result["A"]
    rows["almanac, half B"] = result["B"]
    if result["get_context"]["n"]:
        rows["get_context (first 10 notes)"] = result["get_context"]
    hm = result["honest_miss"]
    listed = result.get("listed")
    padding = (
        f"get_context (match_floor {result['match_floor']}) lists {listed['own']} items per question "
        f"asked of its own conversation, {listed['wrong']} asked of another ({listed['wrong_empty']}% "
        "of those list nothing)\n"
        if listed
        else ""
    )
    return (
        table(rows) + f"\n\nhonest miss: own conversation relevant=true {hm['own_relevant_true']}%, "
        f"wrong conversation relevant=false {hm['wrong_relevant_false']}%\n"
        + padding
        + answer_line(result["answers"], result["fts5_answers"])
        + f"search {result['ms_per_question']} ms/question "
        f"(+ {result['query_embedding_ms']} ms query embedding)\n"
    )


def answer_line(held: dict[str, dict[str, float]], fts5: dict[str, dict[str, float]]) -> str:
    """The answer check (:mod:`bench.answers`) as one line: over all questions and multi-hop,
    with FTS5's first ten over the same texts."""
    parts = []
    for key, name in (("all", "all"), ("c1", "multi-hop")):
        h, f = held[key], fts5[key]
        parts.append(
            f"{name} {h['n']} of {h['asked']}: labelled turns R@10 {h['R@10']} (FTS5 {f['R@10']}), "
            f"answer words {h['answer_words']}% ({f['answer_words']}%), whole answer "
            f"{h['whole_answer']}% ({f['whole_answer']}%)"
        )
    return (
        "answer in the first ten (questions whose labelled turns hold every answer word) — "
        + "; ".join(parts)
        + "\n"
    )


def summary_table(results: Sequence[dict[str, Any]]) -> str:
    """One line per layout: R@10 overall and by half, FTS5 on the same texts, the gap, honest miss."""
    lines = [
        "| layout | R@10 | half A | half B | FTS5 | gap | get_context R@10 | own relevant "
        "| wrong not relevant |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        gap = round(r["all"]["R@10"] - r["fts5_reference"]["R@10"], 1)
        ctx = r["get_context"]["R@10"] if r["get_context"]["n"] else ""
        hm = r["honest_miss"]
        lines.append(
            f"| {r['layout']} | {r['all']['R@10']} | {r['A']['R@10']} | {r['B']['R@10']} | "
            f"{r['fts5_reference']['R@10']} | {gap} | {ctx} | {hm['own_relevant_true']} | "
            f"{hm['wrong_relevant_false']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        help=f"the LoCoMo JSON (default: ${ENV}, else shared/bench/locomo/locomo10_dev.json "
        "in the nearest folder above the checkout)",
    )
    parser.add_argument("--mode", choices=["engine", "mcp"], default="engine")
    parser.add_argument(
        "--layout",
        default="speaker",
        help=f"how each turn is worded: {', '.join(KNOWN)}; several comma-separated, 'all' "
        f"(the first five) or 'checks' (the last {len(CHECKS)})",
    )
    parser.add_argument("--only", help="comma-separated sample ids (default: all)")
    parser.add_argument("--limit-turns", type=int, help="first N turns of each conversation (smoke runs)")
    parser.add_argument("--cache", type=Path, help="embedding cache file to reuse between runs")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the built workspaces under this folder and reuse them in later runs "
        "(to re-measure ranking changes without rebuilding; delete it after a write-side change)",
    )
    parser.add_argument("--no-context", action="store_true", help="skip the get_context measurement")
    parser.add_argument(
        "--floor", type=float, help="get_context's match_floor for this run (default: the engine's)"
    )
    parser.add_argument(
        "--fusion",
        choices=["default", "hand", "learned"],
        default="default",
        help="score candidates by the engine's default, the hand-set weights, or the learned ones",
    )
    parser.add_argument(
        "--fusion-weights",
        type=Path,
        default=WEIGHTS_FILE,
        help="with --fusion learned: the weights file (default: bench/fusion_weights.json)",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--misses", type=Path, help="write every missed evidence turn, its rank and tags here (JSON)"
    )
    args = parser.parse_args(argv)
    args.path = args.path or locomo_path()
    if not args.path.exists():
        print(f"no LoCoMo data at {args.path}; pass its path", file=sys.stderr)
        return 2
    named = {"all": list(LAYOUTS), "checks": list(CHECKS)}
    layouts = named.get(args.layout) or args.layout.split(",")
    unknown = [name for name in layouts if name not in KNOWN]
    if unknown:
        print(
            f"unknown layout {unknown[0]!r}: use one of {', '.join(KNOWN)}, 'all' or 'checks'",
            file=sys.stderr,
        )
        return 2
    from engine.embed.local import LocalEmbedder

    embedder = LocalEmbedder()
    results = []
    for layout in layouts:
        print(f"layout {layout}:", file=sys.stderr)
        results.append(run_layout(args, layout, embedder))
        print(report(results[-1]), flush=True)
        if args.misses:
            for half in ("A", "B"):
                print(f"misses, half {half}: {json.dumps(results[-1]['misses'][half]['summary'])}")
    if len(results) > 1:
        print(summary_table(results))
    if args.misses:
        found = {r["layout"]: r.pop("misses") for r in results}
        args.misses.write_text(json.dumps(found, indent=1, ensure_ascii=False), encoding="utf-8")
    if args.json:
        payload: Any = results[0] if len(results) == 1 else results
        args.json.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
