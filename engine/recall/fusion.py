"""Ranking: weighted fusion of keyword and meaning scores, plus context priors (pure).

For each candidate chunk (found by FTS5 or by vector KNN), its :class:`Signals`::

    keyword   = bm25 / max bm25                     0 … 1
    meaning   = (cos − min cos) / (max − min)       min-max over the candidates; for a memory
                                                    whose vector is not made yet, its keyword
                                                    score stands in
    person    = 1 if the query names its speaker or source — or the chance it is by someone
                the query names, when that was worked out (engine.index.voices)
    session   = its session's score                 (same formula over whole sessions)
    agreement = keyword × meaning

and its score, with the hand-set :class:`Weights`::

    keyword + vector × meaning + person × person + group × session

or, when ``Weights.learned`` is set (``bench.locomo --fusion learned``; not the engine's default,
docs/recall.md), the :class:`Learned` coefficients' weighted sum of the signals — fitted on
LoCoMo's dev half A by ``bench/fit_fusion.py`` and frozen in ``bench/fusion_weights.json``. Either
way a nudge of at most ±nudge for importance is added (never enough to pass a clearly better
match). Both are measured in docs/recall.md.
Reciprocal-rank fusion with k = 60 measured worse and is not used.

The keyword score's column weights depend on whom the query names (:func:`column_weights`): when
it names someone who is the *subject* of a good share of the memories that mention them (the
first name of their words, "Priya: …", "On 8 May, Priya said …"), a memory's own words are the
better evidence and its neighbours' words (the ``context`` column) count less; when the memories
rarely say whom they are about, the exchange around them is what ties them to the person and the
context keeps its full weight.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Weights:
    vector: float = 1.5
    person: float = 0.75
    group: float = 0.35
    group_vector: float = 1.5
    nudge: float = 0.02  # life:rank-floors: importance only reorders near-ties
    subject_context: float = 0.6  # bm25 weight of ``context`` when the query names a subject
    subject_share: float = 0.2  # … one who is the subject of ≥ this share of the rows naming them
    learned: Learned | None = None  # when set, it scores the candidates instead of the weights above


class Candidate(NamedTuple):
    """One chunk (or fact) to score; a named tuple, not a dataclass: a search builds ≈ 200 of
    them per query, and a tuple is built several times faster."""

    key: int
    memory: str
    group: str
    bm25: float | None = None  # negated bm25 (higher is better); None when not a keyword match
    cosine: float | None = None  # raw cosine similarity; None when it has no vector yet
    knn: bool = False  # among the nearest vectors (a meaning match)
    person: bool = False  # the query names its speaker / source
    importance: float | None = None
    created: str | None = None
    voice: float | None = None  # the chance it is by someone the query names (None: not known)
    pending: bool = False  # its vector is not made yet (the index is catching up on writes)


class Scored(NamedTuple):
    key: int
    memory: str
    score: float
    reason: str  # keyword | semantic | both
    cosine: float | None
    created: str | None


def _norm_max(values: Mapping[int, float] | Mapping[str, float]) -> float:
    top = max(values.values(), default=0.0)
    return top if top > 0 else 1.0


def minmax(values: Mapping[int, float]) -> dict[int, float]:
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    span = high - low
    return {k: (v - low) / span if span > 1e-9 else 1.0 for k, v in values.items()}


def group_scores(
    bm25: Mapping[str, float], cosine: Mapping[str, float], weights: Weights | None = None
) -> dict[str, float]:
    """A score per session: normalised bm25 over its whole text + ``group_vector`` × min-max cosine."""
    weights = weights or Weights()
    top = _norm_max(bm25)
    keys = sorted(set(bm25) | set(cosine))
    index = {k: i for i, k in enumerate(keys)}
    cos = minmax({index[k]: v for k, v in cosine.items()})
    return {k: bm25.get(k, 0.0) / top + weights.group_vector * cos.get(index[k], 0.0) for k in keys}


def column_weights(
    columns: Sequence[tuple[str, float]], shares: Sequence[float], weights: Weights | None = None
) -> tuple[float, ...]:
    """The bm25 weight of each FTS column (``columns``: name, default weight) for a query whose
    names are each the subject of ``shares`` of the rows that mention them: with any share at
    least ``subject_share``, the ``context`` column weighs ``subject_context``; else the defaults."""
    weights = weights or Weights()
    subject = any(s >= weights.subject_share for s in shares)
    return tuple(weights.subject_context if subject and name == "context" else w for name, w in columns)


def reason_of(candidate: Candidate) -> str:
    if candidate.bm25 is not None and candidate.knn:
        return "both"
    return "keyword" if candidate.bm25 is not None else "semantic"


class Signals(NamedTuple):
    """What the ranking knows of one candidate, each on a per-query scale (:func:`signals`): the
    terms of the hand-set score, and the inputs a learned scorer (:class:`Learned`) weighs."""

    keyword: float  # bm25 / max bm25 over the candidates: 0 … 1
    meaning: float  # min-max cosine over the candidates (a memory not embedded: its keyword score)
    person: float  # 1 if the query names its speaker / source; the chance it is theirs, if known
    session: float  # its session's score (group_scores)
    agreement: float  # keyword × meaning: both signals at once (a learned weight < 0 is diminishing returns)
    cosine: float  # raw cosine to the query (0 with no vector): absolute, unlike ``meaning``
    nearest: float  # 1 if among the nearest vectors (a meaning match), else 0
    matched: float  # 1 if a keyword match, else 0


Terms = tuple[float, float, float, float, float, float, float, float]  # a Signals as a plain tuple


def _terms(candidates: Sequence[Candidate], groups: Mapping[str, float] | None) -> Iterator[Terms]:
    """Each candidate's signals (the fields of :class:`Signals`, in order) as a plain tuple: the
    hot path builds ≈ 200 per query."""
    top = _norm_max({c.key: c.bm25 for c in candidates if c.bm25 is not None})
    cos = minmax({c.key: c.cosine for c in candidates if c.cosine is not None})
    groups = groups or {}
    for c in candidates:
        keyword = (c.bm25 or 0.0) / top
        # a memory not embedded yet is not the furthest in meaning: its words stand in until it is
        meaning = keyword if c.pending and cos else cos.get(c.key, 0.0)
        person = c.voice if c.voice is not None else (1.0 if c.person else 0.0)
        yield (
            keyword,
            meaning,
            person,
            groups.get(c.group, 0.0),
            keyword * meaning,
            c.cosine or 0.0,
            1.0 if c.knn else 0.0,
            0.0 if c.bm25 is None else 1.0,
        )


def signals(candidates: Sequence[Candidate], groups: Mapping[str, float] | None = None) -> list[Signals]:
    """Each candidate's :class:`Signals`, in order."""
    return [Signals._make(t) for t in _terms(candidates, groups)]


@dataclass(frozen=True)
class Learned:
    """A linear scorer over :class:`Signals` fitted offline (``bench/fit_fusion.py``), its
    coefficients frozen in ``bench/fusion_weights.json``; scaled so that ``keyword`` is 1, the scale of
    the hand-set score that the later bounded terms (coverage, decay, importance) are sized for."""

    keyword: float
    meaning: float
    person: float
    session: float
    agreement: float = 0.0
    cosine: float = 0.0
    nearest: float = 0.0
    matched: float = 0.0

    @property
    def coefficients(self) -> Terms:
        return (
            self.keyword,
            self.meaning,
            self.person,
            self.session,
            self.agreement,
            self.cosine,
            self.nearest,
            self.matched,
        )

    def score(self, s: Signals) -> float:
        return sum(w * v for w, v in zip(self.coefficients, s, strict=True))


def coefficients(weights: Weights) -> Terms:
    """What each signal weighs: the learned scorer's, or the hand-set score's (keyword + vector ×
    meaning + person × person + group × session)."""
    if weights.learned is not None:
        return weights.learned.coefficients
    return (1.0, weights.vector, weights.person, weights.group, 0.0, 0.0, 0.0, 0.0)


def fuse(
    candidates: Sequence[Candidate],
    groups: Mapping[str, float] | None = None,
    weights: Weights | None = None,
) -> list[Scored]:
    """Candidates scored and sorted best first (ties: newer first, then key); by
    ``weights.learned`` when set, else by the hand-set weights."""
    weights = weights or Weights()
    w0, w1, w2, w3, w4, w5, w6, w7 = coefficients(weights)
    out: list[Scored] = []
    for c, (t0, t1, t2, t3, t4, t5, t6, t7) in zip(candidates, _terms(candidates, groups), strict=True):
        score = w0 * t0 + w1 * t1 + w2 * t2 + w3 * t3 + w4 * t4 + w5 * t5 + w6 * t6 + w7 * t7
        if c.importance is not None:
            score += weights.nudge * (c.importance - 0.5) * 2
        out.append(Scored(c.key, c.memory, score, reason_of(c), c.cosine, c.created))
    # best first; ties: newer first, then the lower key (keys are distinct: no two compare equal)
    out.sort(key=lambda s: (s.score, s.created or "", -s.key), reverse=True)
    return out


def best_per_memory(scored: Sequence[Scored]) -> list[Scored]:
    """One entry per memory (its best chunk), order kept."""
    seen: set[str] = set()
    out: list[Scored] = []
    for s in scored:
        if s.memory not in seen:
            seen.add(s.memory)
            out.append(s)
    return out
