"""The same memories, worded in different layouts, are ranked the same (``quality:layouts``).

Nothing in ranking may depend on one dataset's wording: who a memory is by or about, and the day
it is about, are found wherever the layout puts them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

from tests.engine.index.helpers import CALLER, engine

# (person, what they said, the day) — two people, each also mentioning the other's topic.
FACTS = [
    ("Priya", "I baked a lemon tart for the neighbourhood party.", date(2024, 3, 2)),
    ("Tomás", "Priya's lemon tart was gone in minutes, I only had the coffee.", date(2024, 3, 2)),
    ("Tomás", "I went hiking on the ridge trail above the lake.", date(2024, 4, 14)),
    ("Priya", "Tomás keeps talking about hiking; I prefer the climbing gym.", date(2024, 4, 14)),
    ("Priya", "My sister is moving to Lisbon for a job at a design studio.", date(2024, 5, 20)),
    ("Tomás", "I adopted a grey cat from the shelter and named her Pebble.", date(2024, 5, 20)),
]
QUESTIONS = {
    "What did Priya bake?": 0,
    "Where did Tomás go hiking?": 2,
    "Which pet did Tomás adopt?": 5,
    "Where is Priya's sister moving?": 4,
}

Layout = Callable[[str, str, date], str]
LAYOUTS: dict[str, Layout] = {
    "name first": lambda who, said, day: f"{who}: {said}",
    "iso date first": lambda who, said, day: f"{day.isoformat()} {who}: {said}",
    "third person": lambda who, said, day: f"On {day:%B} {day.day}, {day.year}, {who} mentioned: {said}",
    "bullet with date after": lambda who, said, day: f"- {who} — {said} ({day.day} {day:%b} {day.year})",
}


def top_hits(root: Path, layout: Layout) -> dict[str, int]:
    with engine(root) as e:
        ids = [e.memory.remember(CALLER, layout(who, said, day)).id for who, said, day in FACTS]
        e.settle()
        return {q: ids.index(e.recall.search(q, limit=3).hits[0].memory) for q in QUESTIONS}


@pytest.mark.req("quality:layouts")
def test_the_same_facts_in_every_layout_give_the_same_top_hit(tmp_path: Path) -> None:
    found = {name: top_hits(tmp_path / str(i), layout) for i, (name, layout) in enumerate(LAYOUTS.items())}
    for name, tops in found.items():
        assert tops == QUESTIONS, f"layout {name!r} ranked another memory first: {tops}"
