"""Fitting a reply into ``max_tokens`` (pure, ``recall:budget-order``).

- Facts come first, best first, within their share of the budget (default one half, at most
  12 for a query / 20 without); whatever share they leave goes to notes.
- When the notes do not all fit, keyword-only matches are dropped first (weakest first), then the
  weakest meaning matches; the newest relevant match is never dropped — if it alone is too
  big, its text is cut to fit.
- Every dropped match still costs its id in the reply's ``dropped`` list, so that is counted too.

Token counts are estimates (:func:`estimate_tokens`): a quarter of the ASCII characters plus one
per other character, which errs on the generous side for every tokenizer we know of. The sum of
the parts' estimates is never below the estimate of the whole, so a reply packed here fits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_ITEM_CHARS = 1000
CUT_MARK = " …[cut]"
MAX_DROPPED_IDS = 20


def estimate_tokens(text: str) -> int:
    ascii_chars = len(text.encode("ascii", "ignore"))
    return -(-ascii_chars // 4) + (len(text) - ascii_chars)


def json_tokens(value: Any) -> int:
    return estimate_tokens(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


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
    squeeze: tuple[str, int] | None  # (id, tokens it may use) when a protected note must be cut
    tokens: int


def _id_cost(memory_id: str) -> int:
    return estimate_tokens(json.dumps(memory_id)) + 1


def drop_order(notes: Sequence[Entry]) -> list[Entry]:
    """The order in which notes leave: keyword-only first, then the rest; weakest first within each."""
    droppable = [n for n in notes if not n.protected]
    keyword = sorted((n for n in droppable if n.reason == "keyword"), key=lambda n: n.score)
    meaning = sorted((n for n in droppable if n.reason != "keyword"), key=lambda n: n.score)
    return keyword + meaning


def pack(
    facts: Sequence[Entry],
    notes: Sequence[Entry],
    budget: int,
    *,
    facts_share: float = 0.5,
    max_facts: int = 12,
) -> Plan:
    """Choose what fits in ``budget`` tokens (the envelope already paid for)."""
    fact_budget = int(budget * facts_share)
    chosen_facts: list[str] = []
    dropped: list[str] = []
    used = 0
    for fact in facts:
        if len(chosen_facts) < max_facts and used + fact.tokens <= fact_budget:
            chosen_facts.append(fact.id)
            used += fact.tokens
        else:
            dropped.append(fact.id)
    dropped_cost = sum(_id_cost(i) for i in dropped[:MAX_DROPPED_IDS])
    note_budget = budget - used - dropped_cost
    kept = {n.id: n for n in notes}
    total = sum(n.tokens for n in notes)
    for victim in drop_order(notes):
        if total <= note_budget:
            break
        del kept[victim.id]
        total -= victim.tokens
        dropped.append(victim.id)
        if len(dropped) <= MAX_DROPPED_IDS:
            note_budget -= _id_cost(victim.id)
    squeeze = None
    if total > note_budget and kept:
        (only,) = kept.values()  # everything droppable is gone: the protected note remains
        squeeze = (only.id, max(note_budget, 0))
        total = max(note_budget, 0)
    order = [n.id for n in notes if n.id in kept]
    spent = used + total + sum(_id_cost(i) for i in dropped[:MAX_DROPPED_IDS])
    return Plan(tuple(chosen_facts), tuple(order), tuple(dropped), squeeze, spent)
