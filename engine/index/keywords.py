"""Which query terms FTS5 should score, and over how many rows (pure).

FTS5's bm25 costs a few microseconds for every row that matches *any* term of an ``OR`` query,
so its cost grows with the document frequency (df) of the commonest term, not with how useful
that term is. Two facts let recall skip most of that work:

- bm25's idf, ``log((N − df + 0.5) / (df + 0.5))``, is ≤ 0 once a term is in half the rows or
  more, and FTS5 then clamps it to 1e-6: such a term changes a score by about a millionth. When
  the query also has rarer terms, the common ones are left out of the search. The ranking of the
  rows that match a rarer term is the same (to 1e-6); rows matching only common terms, which
  would have scored ≈ 0, are simply not listed.
- When the terms that are left would still make FTS5 score more than ``budget`` rows (only in
  large workspaces), terms are kept rarest first while they fit; if even the rarest does not,
  only the newest ``budget`` rows are scored (:attr:`KeywordPlan.window`). Vector search still
  covers every row.

A query whose terms are *all* that common keeps them all (nothing else could rank its rows) and
is marked :attr:`KeywordPlan.uninformative`; over a large table only its rarest term is scored, over
the newest ``budget`` rows. Recall skips such a search over sessions altogether: their texts are
long, so every session's bm25 is the same to within about 1 % (and it costs the most there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TermStats:
    """Per term: its document frequency (rows matching it)."""

    df: int


@dataclass(frozen=True)
class KeywordPlan:
    terms: tuple[str, ...]  # what to search for (empty: nothing can match)
    window: int | None = None  # score only the newest ``window`` rows (None: all rows)
    dropped: tuple[str, ...] = ()  # left out because bm25 gives them ≈ no weight
    uninformative: bool = False  # every term is common: bm25 can barely tell the rows apart


def common(stats: TermStats, rows: int) -> bool:
    """Whether FTS5's bm25 gives the term an idf of ≈ 0 (it is in at least half the rows)."""
    return 2 * stats.df >= rows


def plan_keywords(
    terms: Sequence[str], stats: Mapping[str, TermStats], rows: int, budget: int
) -> KeywordPlan:
    """The terms worth scoring (see the module docstring); ``stats`` may lack a term (df unknown)."""
    known = [(t, stats.get(t)) for t in terms]
    present = [(t, s) for t, s in known if s is None or s.df > 0]
    if not present:
        return KeywordPlan(())
    informative = [(t, s) for t, s in present if s is None or not common(s, rows)]
    if not informative:
        return _plan_common(present, rows, budget)
    chosen = informative
    names = {t for t, _ in chosen}
    dropped = tuple(t for t, _ in present if t not in names)
    if rows <= budget:
        return KeywordPlan(tuple(t for t, _ in chosen), None, dropped)
    by_df = sorted(chosen, key=lambda ts: 0 if ts[1] is None else ts[1].df)
    kept: list[str] = []
    total = 0
    for term, s in by_df:
        df = 0 if s is None else s.df
        if kept and total + df > budget:
            dropped += (term,)
            continue
        kept.append(term)
        total += df
    order = {t: i for i, t in enumerate(terms)}
    kept.sort(key=order.__getitem__)
    return KeywordPlan(tuple(kept), budget if total > budget else None, dropped)


def _plan_common(present: list[tuple[str, TermStats | None]], rows: int, budget: int) -> KeywordPlan:
    """Every term is in half the rows or more: all are kept if the rows fit the budget, else the
    rarest alone over the newest ``budget`` rows."""
    if rows <= budget:
        return KeywordPlan(tuple(t for t, _ in present), None, (), True)
    rarest = min(present, key=lambda ts: 0 if ts[1] is None else ts[1].df)[0]
    return KeywordPlan((rarest,), budget, tuple(t for t, _ in present if t != rarest), True)
