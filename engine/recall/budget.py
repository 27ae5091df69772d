"""Fitting a reply into ``max_tokens`` (pure, ``recall:budget-order``).

- Facts come first, best first, within their share of the budget (default one half, at most
  12 for a query / 20 without); whatever share they leave goes to notes.
- Notes keep the ranking's order in the reply. When they do not all fit, keyword-only matches
  leave first, worst-ranked first, then the worst-ranked meaning matches (``recall:budget-order``):
  :func:`keep_order` is the order of precedence, and a match is never dropped to keep one below
  it in that order unless the budget forces it — a match that is dropped would not fit beside
  the ones above it that are kept. After the cut, dropped matches are tried again in that order,
  so room freed by a large match is used by the smaller ones below it. The newest relevant match
  is never dropped — if it alone is too big, its text is cut to fit.
- Every dropped match still costs its id in the reply's ``dropped`` list (the first
  :data:`MAX_DROPPED_IDS`, best first), so that is counted too.

Token counts are estimates (:func:`estimate_tokens`): a quarter of the ASCII characters plus one
per other character, which errs on the generous side for every tokenizer we know of. The sum of
the parts' estimates is never below the estimate of the whole, so a reply packed here fits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MAX_ITEM_CHARS = 1000
CUT_MARK = " …[cut]"
MAX_DROPPED_IDS = 20


def estimate_tokens(text: str) -> int:
    ascii_chars = len(text.encode("ascii", "ignore"))
    return -(-ascii_chars // 4) + (len(text) - ascii_chars)


#: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` without building an encoder per call.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def json_tokens(value: Any) -> int:
    return estimate_tokens(_COMPACT.encode(value))


def cut_text(text: str, limit: int = MAX_ITEM_CHARS) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters (mark included), and whether it was cut.

    A cut text is always shorter than ``limit`` allows and never longer than the text it came
    from; when no word survives the cut (``limit`` leaves no room beside the mark) it is empty.
    A negative ``limit`` means no room at all.
    """
    limit = max(limit, 0)
    if len(text) <= limit:
        return text, False
    keep = text[: max(limit - len(CUT_MARK), 0)]
    space = keep.rfind(" ", max(len(keep) - 80, 0))
    keep = (keep[:space] if space > 0 else keep).rstrip()
    return (keep + CUT_MARK if keep else ""), True


@dataclass(frozen=True)
class Entry:
    """One candidate for the reply: its id, its cost in tokens, and what trimming needs to know."""

    id: str
    tokens: int
    score: float
    reason: str  # keyword | semantic | both | graph | fact
    protected: bool = False  # the newest relevant match: never dropped


@dataclass(frozen=True)
class Plan:
    facts: tuple[str, ...]
    notes: tuple[str, ...]
    dropped: tuple[str, ...]
    listed: tuple[str, ...]  # the dropped ids the reply names (best first, as many as fit)
    squeeze: tuple[str, int] | None  # (id, tokens it may use) when a protected note must be cut
    tokens: int


@lru_cache(maxsize=4096)  # pack() prices the same ids over and over while it trims
def _id_cost(memory_id: str) -> int:
    return estimate_tokens(json.dumps(memory_id)) + 1


def keep_order(notes: Sequence[Entry]) -> list[Entry]:
    """The order of precedence when notes do not all fit (``notes`` is in ranking order): meaning
    matches (semantic, both, graph) in ranking order, then keyword-only matches in ranking order."""
    return [n for n in notes if n.reason != "keyword"] + [n for n in notes if n.reason == "keyword"]


def drop_order(notes: Sequence[Entry]) -> list[Entry]:
    """The order in which notes leave: :func:`keep_order` reversed (keyword-only matches first,
    worst-ranked first, then the worst-ranked meaning matches); the protected note never leaves."""
    return [n for n in reversed(keep_order(notes)) if not n.protected]


def spent(fact_tokens: int, dropped_facts: Sequence[str], notes: Sequence[Entry], kept: set[str]) -> int:
    """Tokens a reply uses with ``kept`` notes: facts, kept notes, and the ids it lists as dropped
    (dropped facts, then dropped notes best first, at most :data:`MAX_DROPPED_IDS`)."""
    dropped = [*dropped_facts, *(n.id for n in notes if n.id not in kept)]
    listed = sum(_id_cost(i) for i in dropped[:MAX_DROPPED_IDS])
    return fact_tokens + sum(n.tokens for n in notes if n.id in kept) + listed


def pack(
    facts: Sequence[Entry],
    notes: Sequence[Entry],
    budget: int,
    *,
    facts_share: float = 0.5,
    max_facts: int = 12,
) -> Plan:
    """Choose what fits in ``budget`` tokens (the envelope already paid for); ``notes`` is in
    ranking order, best first."""
    fact_budget = int(budget * facts_share)
    chosen_facts: list[str] = []
    dropped_facts: list[str] = []
    used = 0
    for fact in facts:
        if len(chosen_facts) < max_facts and used + fact.tokens <= fact_budget:
            chosen_facts.append(fact.id)
            used += fact.tokens
        else:
            dropped_facts.append(fact.id)
    kept = {n.id for n in notes}

    def cost(ids: set[str]) -> int:
        return spent(used, dropped_facts, notes, ids)

    for victim in drop_order(notes):
        if cost(kept) <= budget:
            break
        kept.discard(victim.id)
    for note in keep_order(notes):  # room a large match left behind goes to smaller ones below it
        if note.id not in kept and cost(kept | {note.id}) <= budget:
            kept.add(note.id)
    total = cost(kept)
    squeeze = None
    if total > budget and kept:
        (only,) = (n for n in notes if n.id in kept)  # everything droppable is gone
        allowance = max(budget - (total - only.tokens), 0)
        squeeze = (only.id, allowance)
        total = total - only.tokens + allowance
    order = tuple(n.id for n in notes if n.id in kept)
    dropped = (*dropped_facts, *(n.id for n in notes if n.id not in kept))
    listed = dropped[:MAX_DROPPED_IDS]
    while total > budget and listed and squeeze is None:  # not even the ids fit: name fewer
        total -= _id_cost(listed[-1])
        listed = listed[:-1]
    return Plan(tuple(chosen_facts), order, dropped, listed, squeeze, total)
