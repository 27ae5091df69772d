"""Fitting a reply into ``max_tokens`` (pure, ``recall:budget-order``).

- The reply's envelope (``retrieval``, ``relevant``, ``tokens``, the ``dropped`` count) is paid
  first: :func:`pack` is given what is left of the budget after it.
- The newest relevant match is never dropped while its smallest cut form fits: its text is cut a
  quarter at a time (down to its first words), then its tags are halved, every such form marked
  ``cut`` (:func:`cut_forms`). Its smallest form is reserved before facts are chosen, so facts
  give way to it.
- Facts come first, best first, within their share of the budget (default one half, at most
  12 for a query / 20 without); whatever share they leave goes to notes.
- Notes keep the ranking's order in the reply. When they do not all fit, keyword-only matches
  leave first, worst-ranked first, then the worst-ranked meaning matches (``recall:budget-order``):
  :func:`keep_order` is the order of precedence, and a match is never dropped to keep one below
  it in that order unless the budget forces it — a match that is dropped would not fit beside
  the ones above it that are kept. After the cut, dropped matches are tried again in that order,
  so room freed by a large match is used by the smaller ones below it.
- Every dropped match still costs its id in the reply's ``dropped`` list (the first
  :data:`MAX_DROPPED_IDS`, best first), so that is counted too; when even they do not fit, fewer
  are named (the count stays whole).
- :func:`fit` checks the reply as it will be sent and trims it further if it does not fit — a
  bounded safety net: every round takes something away.

Token counts are estimates (:func:`estimate_tokens`): a quarter of the ASCII characters plus one
per other character, which errs on the generous side for every tokenizer we know of. The sum of
the parts' estimates is never below the estimate of the whole, so a reply packed here fits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MAX_ITEM_CHARS = 1000
CUT_MARK = " …[cut]"
MAX_DROPPED_IDS = 20
#: A squeezed item's text is cut down to this many characters before its tags are (then further).
KEEP_CHARS = 120


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
    protected: bool = False  # the newest relevant match: never dropped while its smallest form fits
    least: int | None = None  # a protected entry's smallest cut form, in tokens (None: ``tokens``)

    @property
    def smallest(self) -> int:
        return self.tokens if self.least is None else min(self.least, self.tokens)


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
    guard = next((n for n in notes if n.protected), None)
    reserve = 0 if guard is None else guard.smallest
    fact_budget = min(int(budget * facts_share), budget - reserve)
    chosen_facts: list[Entry] = []
    used = 0
    for fact in facts:
        if len(chosen_facts) < max_facts and used + fact.tokens <= fact_budget:
            chosen_facts.append(fact)
            used += fact.tokens
    picked = {f.id for f in chosen_facts}
    dropped_facts = [f.id for f in facts if f.id not in picked]
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
    dropped = (*dropped_facts, *(n.id for n in notes if n.id not in kept))
    listed = dropped[:MAX_DROPPED_IDS]
    while total > budget and listed:  # not even the ids fit: name fewer (the count stays whole)
        total -= _id_cost(listed[-1])
        listed = listed[:-1]
    squeeze = None
    if total > budget and guard is not None and guard.id in kept:  # it is all that is left
        while chosen_facts and total - guard.tokens + guard.smallest > budget:
            total -= chosen_facts.pop().tokens  # facts give way to the newest relevant match
        allowance = budget - (total - guard.tokens)
        if allowance >= guard.smallest:
            squeeze = (guard.id, allowance)
            total += allowance - guard.tokens
        else:  # not even its smallest form fits beside the envelope
            kept.discard(guard.id)
            total -= guard.tokens
        picked = {f.id for f in chosen_facts}
        dropped = (*(f.id for f in facts if f.id not in picked), *(n.id for n in notes if n.id not in kept))
    order = tuple(n.id for n in notes if n.id in kept)
    return Plan(tuple(f.id for f in chosen_facts), order, dropped, listed, squeeze, total)


def cut_forms(item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Ever smaller forms of a reply item, each marked ``cut``: its text a quarter shorter each
    time down to :data:`KEEP_CHARS`; then its tags halved each time, down to none; then its text
    shorter still, down to its first words. O(log n) forms; other fields (id, banner, …) are
    never cut."""
    form = {**item, "cut": True}
    for floor in (KEEP_CHARS, 0):
        while len(form["text"]) > floor:
            shorter, _ = cut_text(form["text"], len(form["text"]) * 3 // 4)
            if not shorter:
                break
            form = {**form, "text": shorter}
            yield form
        while floor and form.get("tags"):
            form = {**form, "tags": form["tags"][: len(form["tags"]) // 2]}
            yield form


def squeeze(item: dict[str, Any], allowance: int) -> dict[str, Any] | None:
    """The largest of :func:`cut_forms` whose cost (its JSON and a comma) fits ``allowance``, or
    None when not even the smallest does."""
    for form in cut_forms(item):
        if json_tokens(form) + 1 <= allowance:
            return form
    return None


def smallest(item: dict[str, Any]) -> int:
    """The cost in tokens of the smallest of :func:`cut_forms` (of the item itself if it has none)."""
    last = item
    for form in cut_forms(item):
        last = form
    return json_tokens(last) + 1


def fit(reply: dict[str, Any], budget: int, keep: str | None) -> tuple[dict[str, Any], int]:
    """``reply`` trimmed until its compact JSON fits ``budget`` tokens, and its tokens: the named
    dropped ids go first, then notes in :func:`drop_order` (the note ``keep`` last), then facts,
    worst first; ``keep`` is then cut (:func:`cut_forms`) before it goes. Every round takes
    something away, so this ends; a reply that fits is returned as it is (one serialisation)."""
    facts, notes = list(reply["facts"]), list(reply["notes"])
    ids, count = list(reply["dropped"]["ids"]), reply["dropped"]["count"]
    while True:
        out = {**reply, "facts": facts, "notes": notes, "dropped": {"count": count, "ids": ids}}
        used = json_tokens(out)
        if used <= budget:
            return out, used
        if ids:
            ids.pop()
            continue
        others = [n for n in notes if n["id"] != keep]
        if others:
            entries = [Entry(n["id"], 0, n["score"], n["reason"]) for n in others]
            gone = drop_order(entries)[0].id
            notes = [n for n in notes if n["id"] != gone]
        elif facts:
            facts = facts[:-1]
        elif notes:
            (note,) = notes
            spare = used - budget
            smaller = squeeze(note, json_tokens(note) + 1 - spare)
            notes = [smaller] if smaller is not None else []
            if smaller is None:
                keep = None
        else:
            return out, used  # the envelope alone: the smallest reply there is
        count += 1 if (len(facts) + len(notes)) < (len(out["facts"]) + len(out["notes"])) else 0
