"""List questions about a person (``quality:locomo``): the class a query asks for, and the
memories by that person that name members of the class brought into the first places.

Real parts: a workspace on disk, the real embedder and index; the lexicon is pure data.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from engine.recall.context import Recall, RecallSettings
from engine.recall.lists import LEXICON, asked_class
from engine.recall.query import parse_query
from tests.engine.index.helpers import CALLER, engine


@pytest.mark.req("quality:locomo")
def test_the_class_a_question_asks_for_is_found_by_its_noun_singular_or_plural() -> None:
    def asked(text: str) -> str | None:
        found = asked_class(parse_query(text).terms)
        return None if found is None else found.name

    assert asked("What activities does Priya partake in?") == "activity"
    assert asked("Which hobby did Priya pick up?") == "activity"
    assert asked("What books has Sam read this year?") == "book"
    assert asked("Which places did Priya and Sam visit?") == "place"
    assert asked("What instruments does Sam play?") == "instrument"
    assert asked("When did Priya move to Lisbon?") is None  # no class: not a list question
    assert asked("") is None
    for nouns, members in LEXICON.values():  # lower case, no stop words: searchable as they are
        assert nouns and members
        assert all(w == w.casefold() and w.isalpha() for w in nouns + members)
        assert all(parse_query(w).terms == (w,) for w in members)


SAID = [
    ("Priya", "Hey Sam! The school sent home a list of activities for parents. So much paperwork."),
    ("Sam", "Nice! I went hiking in the hills on Saturday, it was lovely."),
    ("Priya", "Yep. Taking care of ourselves matters. I'm off to go swimming with the kids now."),
    ("Sam", "Have fun! My week is mostly spreadsheets."),
    ("Priya", "I never partake in the office gossip, it drains me."),
    ("Sam", "Same here, I keep out of it."),
    ("Priya", "We went camping by the lake last weekend and roasted marshmallows."),
    ("Sam", "That sounds great. I enjoy board games with my cousins."),
    ("Priya", "The activities committee at work wants me to chair it, ugh."),
    ("Sam", "Talk soon, Priya."),
    ("Priya", "Work has been hectic, planning events and activities for the whole team."),
    ("Sam", "Good luck with it."),
]


@pytest.mark.req("quality:locomo")
@pytest.mark.req("recall:get-context")
def test_a_persons_turns_naming_members_of_the_asked_class_are_lifted(tmp_path: Path) -> None:
    with engine(tmp_path / "ws") as e:
        ids = []
        for i, (who, said) in enumerate(SAID):
            if i and i % 2 == 0:
                e.clock.now += timedelta(days=2)  # one sitting every two turns
            ids.append(e.memory.remember(CALLER, f"{who}: {said}").id)
        e.settle()
        question = "What activities does Priya partake in?"
        swimming, camping, hiking = ids[2], ids[6], ids[1]
        lifted = {h.memory: h for h in e.recall.search(question).hits}
        flat = Recall(e.indexer, RecallSettings(listing_weight=0))
        before = {h.memory: h for h in flat.search(question).hits}
        order, order_before = list(lifted), list(before)
        # Priya's turns that share the question's words ("activities", "partake") came before
        # her swimming; it shares none of them, but names an activity
        assert order.index(swimming) < order_before.index(swimming)
        assert lifted[swimming].score > before[swimming].score
        assert lifted[camping].score > before[camping].score
        assert lifted[hiking].score == before[hiking].score  # an activity, but Sam's: not lifted
        for other in set(ids) - {swimming, camping}:  # nothing else moves: no member named
            assert lifted[other].score == before[other].score
        listed = [n["id"] for n in e.recall.get_context(CALLER, question)["notes"]]
        assert listed.index(swimming) < order_before.index(swimming)
