"""Why evidence turns miss the top ten: a per-question analysis for ``bench.locomo --misses``.

For every question, every evidence turn outside the search's first ten is found in a longer
ranking (the search's first 200 memories) and tagged with what may explain it:

- ``list``: one of several evidence turns while another of them is in the first ten (a list
  question answered in part);
- ``neighbour``: the turn just before or after it in its session is in the first ten (the
  question matched the neighbouring turn — often the question the evidence answers);
- ``no-overlap``: its own words share no searchable word (FTS5 porter stem, names left out) with
  the question;
- ``pronoun``: no overlap, and its words refer by pronoun ("it", "that", "they", …);
- ``variant``: a question word is missing from it while one of its words shares the first four
  letters with that word (the same thing written another way: "mom"/"mother" is not caught,
  "painting"/"painted" is caught by the stemmer and not counted);
- ``date``: a temporal question (category 2);
- ``outranked``: none of the above — it shares words with the question and still ranks lower.

Each miss also gets one *primary* class, the first of ``list``, ``neighbour``, ``pronoun``,
``no-overlap``, ``variant``, ``date``, ``outranked`` that applies. Heuristic on purpose: a
diagnosis of where the ranking loses evidence, not a metric.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import apsw

from engine.index.schema import TOKENIZE
from engine.recall.query import parse_query, quote

PRIMARY = ("list", "neighbour", "pronoun", "no-overlap", "variant", "date", "outranked")
PRONOUNS = frozenset(
    [
        "it",
        "its",
        "that",
        "this",
        "these",
        "those",
        "they",
        "them",
        "their",
        "there",
        "he",
        "him",
        "his",
        "she",
        "her",
    ]
)
_WORD = re.compile(r"[a-z]+")
_DIA = re.compile(r"^D(\d+):(\d+)$")
DEEP = 200  # how far down the ranking a missed turn is looked for


@dataclass(frozen=True)
class Miss:
    conv: str
    question: str
    category: int
    evidence: int  # how many evidence turns the question has
    turn: str
    rank: int | None  # 1-based rank in the first DEEP memories; None: not among them
    tags: tuple[str, ...]
    primary: str
    text: str


class Stems:
    """Which turns of one conversation hold a word, as the index's tokenizer reads it."""

    def __init__(self, turns: Sequence[tuple[str, str]]) -> None:
        self.db = apsw.Connection(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(dia UNINDEXED, text, tokenize='{TOKENIZE}')")
        self.db.executemany("INSERT INTO t VALUES (?, ?)", list(turns))
        self.cache: dict[str, frozenset[str]] = {}

    def holding(self, term: str) -> frozenset[str]:
        if term not in self.cache:
            rows = self.db.execute("SELECT dia FROM t WHERE t MATCH ?", (quote(term),)).fetchall()
            self.cache[term] = frozenset(str(r[0]) for r in rows)
        return self.cache[term]


def neighbours(dia: str) -> tuple[str, ...]:
    m = _DIA.match(dia)
    if not m:
        return ()
    session, i = int(m.group(1)), int(m.group(2))
    return tuple(f"D{session}:{j}" for j in (i - 1, i + 1) if j > 0)


def classify(
    question: str,
    category: int,
    evidence: Sequence[str],
    ranked: Sequence[str],
    turn: str,
    said: str,
    stems: Stems,
) -> tuple[str, ...]:
    """The tags of one missed evidence ``turn`` (its words: ``said``) for ``question``."""
    top = set(ranked[:10])
    tags: list[str] = []
    if len(evidence) > 1 and any(e in top for e in evidence if e != turn):
        tags.append("list")
    if any(n in top and n not in evidence for n in neighbours(turn)):
        tags.append("neighbour")
    query = parse_query(question)
    terms = [t for t in query.terms if t not in query.names]
    overlap = any(turn in stems.holding(t) for t in terms)
    words = set(_WORD.findall(said.casefold()))
    if not overlap:
        tags.append("no-overlap")
        if words & PRONOUNS:
            tags.append("pronoun")
    missing = [t for t in terms if turn not in stems.holding(t)]
    if any(len(t) >= 4 and any(w[:4] == t[:4] for w in words) for t in missing):
        tags.append("variant")
    if category == 2:
        tags.append("date")
    if overlap and not set(tags) & {"list", "neighbour", "variant"}:
        tags.append("outranked")
    return tuple(tags)


def primary(tags: Sequence[str]) -> str:
    return next(p for p in PRIMARY if p in tags)


def analyse(
    conv_id: str,
    turns: Sequence[tuple[str, str]],
    questions: Sequence[tuple[str, int, tuple[str, ...]]],
    rank: Callable[[str], list[str]],
) -> list[Miss]:
    """Every missed evidence turn of ``questions`` (text, category, evidence ids) in one
    conversation whose turns are ``turns`` (id, words); ``rank`` gives a question's turn ids,
    best first, at least :data:`DEEP` memories deep."""
    stems = Stems(turns)
    said = dict(turns)
    out: list[Miss] = []
    for text, category, evidence in questions:
        ranked = rank(text)
        for turn in evidence:
            if turn in ranked[:10]:
                continue
            tags = classify(text, category, evidence, ranked, turn, said.get(turn, ""), stems)
            where = ranked.index(turn) + 1 if turn in ranked else None
            out.append(
                Miss(
                    conv_id,
                    text,
                    category,
                    len(evidence),
                    turn,
                    where,
                    tags,
                    primary(tags),
                    said.get(turn, ""),
                )
            )
    return out


def bucket(rank: int | None) -> str:
    if rank is None:
        return f"> {DEEP}"
    for high in (20, 50, 100, DEEP):
        if rank <= high:
            return f"≤ {high}"
    return f"> {DEEP}"


def ceiling(misses: Sequence[Miss], questions: int, cut: int) -> float:
    """Recall@10 (percent, over ``questions``) if the search's first ``cut`` memories were put in
    the best order — the most a reranker of those ``cut`` could reach: each question keeps every
    evidence turn ranked within ``cut`` (at most 10 of them) and loses the rest."""
    per: dict[tuple[str, str], tuple[int, int]] = {}  # (conv, question) → (evidence, beyond cut)
    for m in misses:
        evidence, beyond = per.get((m.conv, m.question), (m.evidence, 0))
        per[m.conv, m.question] = (evidence, beyond + (m.rank is None or m.rank > cut))
    kept = sum(min(10, e - lost) / e for e, lost in per.values()) + (questions - len(per))
    return round(100 * kept / questions, 1) if questions else 0.0


def summary(misses: Sequence[Miss], evidence_total: int, questions: int = 0) -> dict[str, Any]:
    """Counts: primary classes, every tag, and ranks (in buckets); with ``questions`` (how many
    were asked), the recall@10 a reranker of the first 20, 50, 100, 200 could reach at best."""
    return {
        "evidence_turns": evidence_total,
        "reorder_ceiling": {str(cut): ceiling(misses, questions, cut) for cut in (20, 50, 100, DEEP)}
        if questions
        else {},
        "missed": len(misses),
        "primary": dict(Counter(m.primary for m in misses).most_common()),
        "tags": dict(Counter(t for m in misses for t in m.tags).most_common()),
        "ranks": {
            b: sum(1 for m in misses if bucket(m.rank) == b)
            for b in ("≤ 20", "≤ 50", "≤ 100", f"≤ {DEEP}", f"> {DEEP}")
        },
        "by_category": {
            str(c): dict(Counter(m.primary for m in misses if m.category == c).most_common())
            for c in (1, 2, 3, 4)
        },
    }


def records(misses: Sequence[Miss]) -> list[dict[str, Any]]:
    return [asdict(m) for m in misses]
