"""Gathering and ranking candidates from the index (the I/O shell around :mod:`engine.recall.fusion`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.index.db import ChunkRow, IndexDB
from engine.index.schema import CHUNK_WEIGHTS
from engine.recall.fusion import Candidate, Scored, Weights, best_per_memory, fuse, group_scores
from engine.recall.lexical import lexical_score
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


def _cos(matrix: dict[int, Any], query: np.ndarray[Any, Any]) -> dict[int, float]:
    return {k: float(np.dot(v, query)) for k, v in matrix.items()}


def rank_chunks(
    db: IndexDB,
    query: Query,
    qvec: np.ndarray[Any, Any] | None,
    visible: Visible,
    *,
    depth: int = 100,
    limit: int = 20,
    weights: Weights | None = None,
) -> Ranked:
    """The best ``limit`` memories (one hit each) for ``query``, among those ``visible``."""
    weights = weights or Weights()
    keyword = db.fts("chunks", query.fts, CHUNK_WEIGHTS, depth)
    nearest = db.knn("chunks", qvec, depth) if qvec is not None else []
    ids = list(dict.fromkeys([r for r, _ in keyword] + [r for r, _ in nearest]))
    rows = {k: r for k, r in db.chunk_rows(ids).items() if visible(r.state, r.scope)}
    if not rows:
        return Ranked((), bool(query.fts), qvec is not None)
    bm25 = {r: s for r, s in keyword if r in rows}
    cosine = {r: s for r, s in nearest if r in rows}
    if qvec is not None:
        cosine.update(_cos(db.chunk_vectors([k for k in rows if k not in cosine]), qvec))
    group_keys = sorted({r.grp for r in rows.values() if r.grp})
    group_score: dict[str, float] = {}
    if group_keys and weights.group:
        groups = db.groups(group_keys)
        by_id = {rowid: key for key, (rowid, _) in groups.items()}
        g_bm25 = {by_id[r]: s for r, s in db.fts("groups", query.fts, (1.0,), 200) if r in by_id}
        g_cos = {}
        if qvec is not None:
            g_cos = {k: float(np.dot(v, qvec)) for k, (_, v) in groups.items() if v is not None}
        group_score = group_scores(g_bm25, g_cos, weights)
    near = {r for r, _ in nearest}
    candidates = [
        Candidate(
            key=k,
            memory=row.memory,
            group=row.grp,
            bm25=bm25.get(k),
            cosine=cosine.get(k),
            knn=k in near,
            person=bool(row.speaker and names_person(query, row.speaker))
            or bool(row.source and names_person(query, row.source)),
            importance=row.importance,
            created=row.created,
        )
        for k, row in rows.items()
    ]
    ranked = best_per_memory(fuse(candidates, group_score, weights))[:limit]
    return Ranked(tuple(_hit(rows[s.key], s, query) for s in ranked), bool(query.fts), qvec is not None)


def _hit(row: ChunkRow, scored: Scored, query: Query) -> Hit:
    lexical = lexical_score(query.terms, row.text, row.tags.split("\n"))
    return Hit(row, scored.score, scored.reason, scored.cosine, lexical)


def graph_hits(db: IndexDB, hits: tuple[Hit, ...], visible: Visible, *, follow: int = 5) -> list[Hit]:
    """Notes linked (``[[wikilinks]]``) from the best ``follow`` hits, not already among them."""
    sources = [h.memory for h in hits[:follow]]
    if not sources:
        return []
    have = {h.memory for h in hits}
    parents = {h.memory: h for h in hits}
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
        out.append(Hit(row, parent.score * 0.5, "graph", None, 0.0))
    return out
