"""Packing (``recall:budget-order``): keyword-only matches leave first, then the worst-ranked meaning
matches; the reply keeps the ranking's order. Properties of ``engine.recall.budget.pack``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recall import budget as budgeting


def _notes(sizes: list[int], protected: int | None = None) -> list[budgeting.Entry]:
    """Notes in ranking order (best first), scores falling, reasons alternating."""
    reasons = ("both", "keyword", "semantic")
    return [
        budgeting.Entry(f"nte_{i:02d}", size, 10.0 - i * 0.1, reasons[i % 3], protected=i == protected)
        for i, size in enumerate(sizes)
    ]


@pytest.mark.req("recall:budget-order")
def test_keyword_only_matches_leave_first_then_the_worst_meaning_matches() -> None:
    notes = [
        budgeting.Entry("nte_best", 100, 3.0, "both"),
        budgeting.Entry("nte_kw_strong", 100, 2.5, "keyword"),
        budgeting.Entry("nte_sem", 100, 2.0, "semantic"),
        budgeting.Entry("nte_sem_weak", 100, 1.5, "semantic"),
        budgeting.Entry("nte_kw_weak", 100, 1.0, "keyword"),
        budgeting.Entry("nte_newest", 100, 0.5, "semantic", protected=True),
    ]
    plan = budgeting.pack([], notes, 330, facts_share=0.5)
    # both keyword-only matches leave, even the one ranked above the meaning matches, then the
    # weaker meaning match; the newest relevant match stays; the reply keeps the ranking's order
    assert plan.notes == ("nte_best", "nte_sem", "nte_newest")
    assert set(plan.dropped) == {"nte_kw_strong", "nte_sem_weak", "nte_kw_weak"}
    assert plan.dropped == ("nte_kw_strong", "nte_sem_weak", "nte_kw_weak")  # ranking order
    assert plan.tokens <= 330
    roomy = budgeting.pack([], notes, 460, facts_share=0.5)
    assert roomy.notes == ("nte_best", "nte_sem", "nte_sem_weak", "nte_newest")


@pytest.mark.req("recall:budget-order")
def test_room_a_large_match_leaves_goes_to_smaller_ones_below_it() -> None:
    notes = [budgeting.Entry("nte_a", 100, 3.0, "both"), budgeting.Entry("nte_big", 400, 2.0, "both")]
    notes.append(budgeting.Entry("nte_small", 50, 1.0, "keyword"))
    plan = budgeting.pack([], notes, 200)
    assert plan.notes == ("nte_a", "nte_small") and plan.dropped == ("nte_big",)


@pytest.mark.req("recall:budget-order")
def test_everything_fits_then_nothing_moves() -> None:
    notes = _notes([40, 80, 10, 60])
    plan = budgeting.pack([], notes, 1000)
    assert plan.notes == tuple(n.id for n in notes) and plan.dropped == ()


@pytest.mark.req("recall:budget-order")
@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=20),
    fact_sizes=st.lists(st.integers(1, 200), max_size=5),
    budget=st.integers(0, 3000),
    protect=st.one_of(st.none(), st.integers(0, 19)),
    least=st.integers(1, 400),
)
def test_a_better_match_leaves_only_when_it_cannot_fit_beside_the_better_ones_kept(
    sizes: list[int], fact_sizes: list[int], budget: int, protect: int | None, least: int
) -> None:
    protected = protect if protect is not None and protect < len(sizes) else None
    notes = _notes(sizes, protected)
    if protected is not None:  # its smallest cut form
        notes[protected] = replace(notes[protected], least=min(least, notes[protected].tokens))
    facts = [budgeting.Entry(f"fct_{i}", s, 1.0, "fact") for i, s in enumerate(fact_sizes)]
    plan = budgeting.pack(facts, notes, budget)
    rank = {n.id: i for i, n in enumerate(notes)}
    precedence = {n.id: i for i, n in enumerate(budgeting.keep_order(notes))}
    kept = set(plan.notes)
    # the budget holds, whatever the sizes; the ranking's order is kept, and every note is
    # either kept or counted as dropped
    assert plan.tokens <= budget
    assert list(plan.notes) == sorted(plan.notes, key=rank.__getitem__)
    assert kept | {d for d in plan.dropped if d.startswith("nte_")} == set(rank)
    assert len(plan.facts) + len(plan.notes) + len(plan.dropped) == len(facts) + len(notes)
    assert plan.listed == plan.dropped[: len(plan.listed)] and len(plan.listed) <= budgeting.MAX_DROPPED_IDS
    if protected is not None:  # the newest relevant match is kept whenever its smallest form fits
        guard = notes[protected]
        assert (guard.id in kept) == (guard.smallest <= budget)
        if plan.squeeze is not None:  # only it is left, cut to what remains
            assert plan.notes == (guard.id,) and guard.smallest <= plan.squeeze[1] < guard.tokens
            return
        if guard.id not in kept:
            return
    assert plan.squeeze is None
    used = sum(f.tokens for f in facts if f.id in plan.facts)
    dropped_facts = [d for d in plan.dropped if d.startswith("fct_")]
    if len(plan.listed) == min(len(plan.dropped), budgeting.MAX_DROPPED_IDS):
        assert plan.tokens == budgeting.spent(used, dropped_facts, notes, kept)
    for note in notes:
        if note.id in kept:
            continue
        # a dropped note would not fit even beside only the notes kept that precede it in
        # keep_order (meaning matches by rank, then keyword-only by rank) and the protected one
        better = {k for k in kept if precedence[k] < precedence[note.id]} | (
            {notes[protected].id} if protected is not None else set()
        )
        assert budgeting.spent(used, dropped_facts, notes, better | {note.id}) > budget


def _item(i: int, text: str, reason: str = "both") -> dict[str, Any]:
    return {
        "id": f"nte_{i:02d}",
        "kind": "note",
        "text": text,
        "score": 1.0 - i / 100,
        "reason": reason,
        "tags": [],
    }


@pytest.mark.req("recall:budget-order")
@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(max_size=400), max_size=8),
    ids=st.integers(0, 25),
    budget=st.integers(40, 1500),
)
def test_fit_trims_a_reply_until_it_fits_keeping_the_protected_note_last(
    texts: list[str], ids: int, budget: int
) -> None:
    notes = [_item(i, t, ("keyword", "both")[i % 2]) for i, t in enumerate(texts)]
    reply = {
        "facts": [_item(90, "a fact " * 30, "fact")],
        "notes": notes,
        "retrieval": "hybrid",
        "relevant": True,
        "tokens": budget,
        "dropped": {
            "count": ids,
            "ids": [f"nte_x{i:02d}" for i in range(min(ids, budgeting.MAX_DROPPED_IDS))],
        },
    }
    keep = notes[-1]["id"] if notes else None
    out, used = budgeting.fit(reply, budget, keep)
    assert used == budgeting.json_tokens(out) <= budget  # the envelope alone fits every budget here
    assert out["dropped"]["count"] == ids + (1 + len(notes)) - len(out["facts"]) - len(out["notes"])
    if budgeting.json_tokens(reply) <= budget:
        assert out == reply  # a reply that fits is left as it is
    if len(out["facts"]) + len(out["notes"]) < 1 + len(notes):
        assert out["dropped"]["ids"] == []  # the named ids went before any item
    kept = [n for n in out["notes"] if n["id"] == keep]
    if kept and kept[0] != notes[-1]:  # the protected note was cut: it is all that is left
        assert out["notes"] == kept and out["facts"] == [] and kept[0]["cut"] is True
