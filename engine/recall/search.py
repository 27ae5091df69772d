"""Gathering and ranking candidates from the index (the I/O shell around :mod:`engine.recall.fusion`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.index import voices
from engine.index.reads import IndexReader
from engine.index.schema import CHUNKS, ChunkRow
from engine.recall.fusion import (
    Candidate,
    Scored,
    Weights,
    best_per_memory,
    column_weights,
    fuse,
    group_scores,
)
from engine.recall.lexical import lexical_score
from engine.recall.lists import Listing
from engine.recall.query import Query, names_person

log = logging.getLogger("almanac.engine.recall")

Visible = Callable[[str, str | None], bool]  # (state, scope) → may this caller see it here?


@dataclass(frozen=True)
class Hit:
    row: ChunkRow
    score: float
    reason: str  # keyword | semantic | both | graph
    cosine: float | None
    lexical: float

    @property
    def memory(self) -> str:
        return self.row.memory


@dataclass(frozen=True)
class Ranked:
    hits: tuple[Hit, ...]
    keyword: bool  # keyword search ran
    semantic: bool  # vector search ran


QVec = np.ndarray[Any, Any] | None
#: Rows bm25 may score per query before the plan narrows it (engine.index.keywords).
KEYWORD_BUDGET = 8_000


@dataclass(frozen=True)
class Gathered:
    """A query's candidates, before they are scored (:func:`gather`)."""

    rows: dict[int, ChunkRow]
    candidates: tuple[Candidate, ...]
    groups: dict[str, float]  # each candidate session's score (fusion.group_scores)
    keyword: bool  # keyword search ran
    semantic: bool  # vector search ran
    said: dict[int, float] = field(default_factory=dict)  # a list question's member matches (bm25)


def gather(
    db: IndexReader,
    query: Query,
    qvec: QVec | Callable[[], QVec],
    visible: Visible,
    *,
    depth: int = 100,
    weights: Weights | None = None,
    budget: int = KEYWORD_BUDGET,
    listing: Listing | None = None,
) -> Gathered:
    """The candidates for ``query`` among those ``visible``: the keyword search's first ``depth``
    and the nearest ``depth`` vectors, with what fusion scores them by (and the fitting script
    reads: ``bench/fit_fusion.py``).

    ``listing``: the query names someone and asks for a class of things (:mod:`engine.recall.lists`):
    the memories whose words name members of the class join the candidates (``Gathered.said``).
    """
    weights = weights or Weights()
    columns = column_weights(CHUNKS.fts, [db.subject_share(n) for n in query.names], weights)
    keyword, _ = db.keyword("chunks", query.terms, columns, depth, budget)
    g_keyword: list[tuple[int, float]] = []
    if weights.group and query.terms:
        g_keyword, _ = db.keyword("groups", query.terms, (1.0,), 200, budget, informative_only=True)
    vector = qvec() if callable(qvec) else qvec
    nearest = db.knn("chunks", vector, depth) if vector is not None else []
    said: list[tuple[int, float]] = []  # the memories whose words name a member of the class asked for
    if listing is not None and query.names:
        # the memories' own words only (the other columns weigh 0), within the keyword budget
        own = tuple(1.0 if name == "text" else 0.0 for name, _ in CHUNKS.fts)
        found, _ = db.keyword("chunks", listing.members, own, listing.depth, budget)
        said = [(r, s) for r, s in found if s > 0]
    ids = list(dict.fromkeys([r for r, _ in keyword] + [r for r, _ in nearest] + [r for r, _ in said]))
    rows = {k: r for k, r in db.chunk_rows(ids).items() if visible(r.state, r.scope)}
    if not rows:
        return Gathered({}, (), {}, bool(query.terms), vector is not None, dict(said))
    bm25 = {r: s for r, s in keyword if r in rows}
    cosine = {r: s for r, s in nearest if r in rows}
    if vector is not None:
        cosine.update(db.cosines("chunks", vector, [k for k in rows if k not in cosine]))
    group_keys = sorted({r.grp for r in rows.values() if r.grp})
    group_score: dict[str, float] = {}
    if group_keys and weights.group:
        groups = db.groups(group_keys)
        by_id = {rowid: key for key, (rowid, _) in groups.items()}
        g_bm25 = {by_id[r]: s for r, s in g_keyword if r in by_id}
        g_cos = {}
        if vector is not None:
            g_cos = {k: float(np.dot(v, vector)) for k, (_, v) in groups.items() if v is not None}
        group_score = group_scores(g_bm25, g_cos, weights)
    near = {r for r, _ in nearest}
    named = _named_people(query, rows.values())
    chance = _chances(db, query, rows.values())
    candidates = tuple(
        Candidate(
            k,
            row.memory,
            row.grp,
            bm25.get(k),
            cosine.get(k),
            k in near,
            row.speaker in named or row.source in named,
            row.importance,
            row.created,
            chance.get(row.memory),
            vector is not None and k not in cosine,
        )
        for k, row in rows.items()
    )
    return Gathered(rows, candidates, group_score, bool(query.terms), vector is not None, dict(said))


def rank_chunks(
    db: IndexReader,
    query: Query,
    qvec: QVec | Callable[[], QVec],
    visible: Visible,
    *,
    depth: int = 100,
    limit: int = 20,
    weights: Weights | None = None,
    budget: int = KEYWORD_BUDGET,
    listing: Listing | None = None,
) -> Ranked:
    """The best ``limit`` memories (one hit each) for ``query``, among those ``visible``.

    ``qvec`` may be a function that returns the query vector: it is called once the keyword
    searches are done, so that a query embedding computed meanwhile (in another thread) overlaps
    them.

    ``listing``: the query names someone and asks for a class of things (:mod:`engine.recall.lists`):
    the memories whose words name members of the class join the candidates, and those by the
    person it names are lifted (:func:`_listed`).
    """
    found = gather(db, query, qvec, visible, depth=depth, weights=weights, budget=budget, listing=listing)
    fused = fuse(found.candidates, found.groups, weights)
    if listing is not None and found.said:
        fused = _listed(fused, found.candidates, listing, found.said)
    ranked = best_per_memory(fused)[:limit]
    hits = tuple(_hit(found.rows[s.key], s, query) for s in ranked)
    return Ranked(hits, found.keyword, found.semantic)


def _listed(
    fused: list[Scored], candidates: Sequence[Candidate], listing: Listing, said: dict[int, float]
) -> list[Scored]:
    """``fused`` with each memory by the person the query names lifted by ``listing.weight`` ×
    its bm25 over the class's members (``said``; over the best such bm25 among their memories),
    times the person prior's own share (1 when named as its speaker or source, else the chance
    it is theirs), re-sorted."""
    share = {c.key: c.voice if c.voice is not None else float(c.person) for c in candidates if c.key in said}
    theirs = {k: v for k, v in share.items() if v > 0}
    top = max((said[k] for k in theirs), default=0.0)
    if top <= 0:
        return fused
    lift = {k: listing.weight * v * said[k] / top for k, v in theirs.items()}
    out = [s._replace(score=s.score + lift[s.key]) if s.key in lift else s for s in fused]
    out.sort(key=lambda s: (s.score, s.created or "", -s.key), reverse=True)
    return out


def _named_people(query: Query, rows: Iterable[ChunkRow]) -> set[str]:
    """The speakers and sources among ``rows`` that ``query`` names (:func:`names_person`), each
    worked out once: a few people recur over a search's ≈ 200 candidates."""
    people = {p for row in rows for p in (row.speaker, row.source) if p}
    return {p for p in people if names_person(query, p)}


def _chances(db: IndexReader, query: Query, rows: Iterable[ChunkRow]) -> dict[str, float]:
    """For each memory among ``rows`` whose writer was worked out (:mod:`engine.index.voices`),
    the chance that it is by someone the query names — when it names one of its two people."""
    if not query.names:
        return {}
    return voices.chances(db.voices(sorted({r.memory for r in rows})), query.names)


def _hit(row: ChunkRow, scored: Scored, query: Query) -> Hit:
    lexical = lexical_score(query.terms, row.text, row.tags.split("\n"))
    return Hit(row, scored.score, scored.reason, scored.cosine, lexical)


def graph_hits(
    db: IndexReader,
    hits: tuple[Hit, ...],
    visible: Visible,
    query: Query | None = None,
    *,
    follow: int = 5,
    per_name: int = 2,
    most: int = 5,
    exclude: Collection[str] = (),
) -> list[Hit]:
    """Notes linked (``[[wikilinks]]``) from the best ``follow`` hits, then memories that share a
    *rare* name with them (one the query does not name and few memories mention: a person,
    place or thing the answer may continue in) — none already among the hits. A shared name,
    weaker evidence than a link, never brings back one of ``exclude`` (matches the caller left
    out as too weak).

    A graph item scores half its parent, but never above the last of ``hits``: they follow the
    search's ranking, which they extend and never reorder."""
    sources = [h.memory for h in hits[:follow]]
    if not sources:
        return []
    have = {h.memory for h in hits}
    parents = {h.memory: h for h in hits}
    floor = min(h.score for h in hits)
    out: list[Hit] = []
    links = db.links_from(sources)
    targets = {t for _, t in links if t not in have}
    rows = {r.memory: r for r in db.memory_chunks(sorted(targets))} if targets else {}
    for src, target in links:
        row = rows.get(target)
        if row is None or target in have or not visible(row.state, row.scope):
            continue
        have.add(target)
        parent = parents[src]
        out.append(Hit(row, min(parent.score * 0.5, floor), "graph", None, 0.0))
    have.update(exclude)  # a link is followed to any note; a shared name only to one not left out
    named = set(query.words) if query is not None else set()
    for parent in hits[:follow]:
        for name in parent.row.names.split():
            if len(out) >= most:
                return out
            if name.casefold() in named:
                continue
            named.add(name.casefold())
            found = db.chunk_rows(db.rare_mentions(name, per_name + 1))
            for row in sorted(found.values(), key=lambda r: r.id):
                if row.memory in have or not visible(row.state, row.scope) or len(out) >= most:
                    continue
                have.add(row.memory)
                out.append(Hit(row, min(parent.score * 0.5, floor), "graph", None, 0.0))
    return out
