"""The same memories, worded in different layouts, are ranked the same (``quality:layouts``).

Nothing in ranking may depend on one dataset's wording: who a memory is by or about, and the day
it is about, are found wherever the layout puts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from engine.embed.base import Matrix, ProviderStatus, Vector
from engine.index.reads import IndexReader
from engine.recall.context import Recall, RecallSettings
from tests.engine.index.helpers import CALLER, EMBEDDER, engine

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


PLAIN: Layout = lambda who, said, day: said  # noqa: E731 — nothing says who spoke


def verdicts(root: Path, layout: Layout, questions: list[str]) -> dict[str, bool]:
    """``relevant`` for each question, by keywords alone (so the words decide, not the model)."""
    with engine(root) as e:
        for who, said, day in FACTS:
            e.memory.remember(CALLER, layout(who, said, day))
        e.memory.remember(CALLER, "Priya and Tomás planned the next party together.")  # both are known
        e.settle()
        words_only = Recall(e.indexer, RecallSettings(semantic=False))
        return {q: words_only.search(q, limit=10).relevant for q in questions}


@pytest.mark.req("quality:layouts")
@pytest.mark.req("quality:honest-miss")
def test_whether_anything_matched_does_not_depend_on_the_memory_naming_the_person(tmp_path: Path) -> None:
    """A question names whom it is about; whether the memory repeats that name is a matter of
    wording, so the relevant verdict is the same with and without it, and a stranger's name
    still makes a miss."""
    asked = ["On which trail did Tomás go hiking?", "Which shelter cat did Tomás name?"]
    stranger = ["Where did Zoltan go hiking?"]
    named = verdicts(tmp_path / "named", LAYOUTS["name first"], asked + stranger)
    plain = verdicts(tmp_path / "plain", PLAIN, asked + stranger)
    assert named == plain, f"the verdict depends on the layout: {named} vs {plain}"
    assert all(plain[q] for q in asked) and not plain[stranger[0]], plain


@pytest.mark.req("quality:honest-miss")
def test_a_month_in_a_question_does_not_make_a_stranger_known(tmp_path: Path) -> None:
    """A capitalised month is not a person: where the memories are dated April, "in April" does
    not make a question about a stranger a match (it counts as a word to find, not as a name the
    workspace knows and every memory covers)."""
    asked = ["The hiking trail of Tomás in April?"]
    stranger = ["The hiking trail of Zoltan in April?"]
    dated = verdicts(tmp_path / "dated", LAYOUTS["third person"], asked + stranger)
    assert dated == {asked[0]: True, stranger[0]: False}, dated


@pytest.mark.req("quality:honest-miss")
def test_the_day_a_memory_is_about_covers_the_month_a_question_names(tmp_path: Path) -> None:
    """Whether a memory says "in March" or was simply written (or dated) in March is wording:
    keyword coverage reads the days a memory is about with its words, so the month it is about
    makes a match, and another month does not."""
    with engine(tmp_path) as e:  # the test clock writes on 2 March 2026
        e.memory.remember(CALLER, "I baked a lemon tart for the neighbourhood party.")
        e.memory.remember(CALLER, "The climbing gym opens early on weekdays.")
        e.settle()
        words_only = Recall(e.indexer, RecallSettings(semantic=False))
        assert words_only.search("What was baked in March 2026?", limit=10).relevant
        assert not words_only.search("What was baked in July 2025?", limit=10).relevant


class RecordingEmbedder:
    """The real embedder, remembering the texts of the query vectors asked for."""

    def __init__(self) -> None:
        self.inner = EMBEDDER
        self.queries: list[str] = []
        self.provider = EMBEDDER.provider
        self.model_id = EMBEDDER.model_id
        self.dim = EMBEDDER.dim

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        self.queries.append(text)
        return self.inner.embed_query(text)

    def probe(self) -> ProviderStatus:
        return self.inner.probe()


@pytest.mark.req("quality:layouts")
def test_the_query_vector_leaves_out_the_names_the_workspace_knows(tmp_path: Path) -> None:
    """Whether a memory repeats whom it is about is wording, so the meaning side of a search
    embeds the question without the names the workspace knows (the keywords and the person prior
    still use them); a name it has never seen stays."""
    recorder = RecordingEmbedder()
    with engine(tmp_path, recorder) as e:
        for who, said, day in FACTS:
            e.memory.remember(CALLER, LAYOUTS["name first"](who, said, day))
        e.settle()
        recorder.queries.clear()
        e.recall.search("What did Priya and Zoltan bake?", limit=3)
        e.recall.get_context(CALLER, "Which pet did Tomás adopt?")
        assert recorder.queries == ["What did and Zoltan bake?", "Which pet did adopt?"]
        assert e.recall.search("Priya?", limit=3).hits  # nothing but a name: the name is embedded
        assert recorder.queries[-1] == "Priya?"


@pytest.mark.req("quality:layouts")
@pytest.mark.req("quality:honest-miss")
def test_an_answer_worded_around_the_question_in_its_neighbours_is_a_match(tmp_path: Path) -> None:
    """What was said about someone is often worded in the exchange around it ("What did you bake
    for the party?" — "A lemon tart."): with a known person named, the neighbours' words count
    toward the match, whatever the answer itself repeats."""
    with engine(tmp_path) as e:
        e.memory.remember(CALLER, "Priya and Tomás met at the climbing gym.")  # both are known
        e.memory.remember(CALLER, "What did you bake for dessert?")
        tart = e.memory.remember(CALLER, "A lemon tart, from my grandmother's recipe.").id
        e.memory.remember(CALLER, "Everyone at the party loved it.")
        e.settle()
        words_only = Recall(e.indexer, RecallSettings(semantic=False))
        found = words_only.search("What lemon dessert did Priya bake for the party?", limit=10)
        assert tart in [h.memory for h in found.hits[:5]] and found.relevant
        stranger = words_only.search("What lemon dessert did Zoltan bake for the party?", limit=10)
        assert not stranger.relevant


class RecordingReader:
    """The engine's real index reader, remembering the column weights of each keyword search."""

    def __init__(self, inner: IndexReader) -> None:
        self.inner = inner
        self.columns: list[tuple[float, ...]] = []

    def keyword(self, table: str, terms: Sequence[str], weights: Sequence[float], *a: Any, **k: Any) -> Any:
        if table == "chunks":
            self.columns.append(tuple(weights))
        return self.inner.keyword(table, terms, weights, *a, **k)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.req("quality:layouts")
def test_the_neighbours_weigh_less_for_a_person_the_memories_are_about(tmp_path: Path) -> None:
    """Where memories say whom they are about, a query naming that person weighs a memory's own
    words over its neighbours' (context 0.6); a person only ever addressed or mentioned is tied
    to a memory by the exchange around it, which keeps its full weight (0.75)."""
    with engine(tmp_path) as e:
        e.memory.remember(CALLER, "Priya: I baked a lemon tart for the party.")
        e.memory.remember(CALLER, "Thanks, Tomás! The coffee was perfect.")
        e.memory.remember(CALLER, "Priya: next time I will bake two.")
        e.memory.remember(CALLER, "Glad you liked it, Tomás.")
        e.settle()
        reader = e.indexer.db.reader
        assert reader.subject_share("Priya") >= 0.2  # the subject of most memories naming her
        assert reader.subject_share("tomás") == 0.0  # only ever addressed
        assert reader.subject_share("Zoltan") == 0.0  # never seen
        recording = RecordingReader(reader)
        e.recall.db = recording  # type: ignore[assignment]
        e.recall.search("What did Priya bake?", limit=3)
        e.recall.search("What did Tomás drink?", limit=3)
        e.recall.search("What did anyone drink?", limit=3)
        assert [c[1] for c in recording.columns] == [0.6, 0.75, 0.75]
        e.memory.remember(CALLER, "Tomás: I will bring the coffee again.")  # now he is a subject too
        e.memory.remember(CALLER, "Tomás: and some oat milk.")
        e.settle()
        assert reader.subject_share("Tomás") > 0.0


# An exchange kept turn by turn (who, what they said); each turn but one is the same in both
# wordings below, and the names a turn speaks to are in it either way.
EXCHANGE = [
    ("Priya", "Hey Sam, I baked a lemon tart for the party."),
    ("Sam", "Lovely! I baked a loaf of rye bread for it."),
    ("Priya", "Rye bread sounds great, Sam."),
    ("Sam", "Thanks, Priya! I am bringing a jug of cider too."),
    ("Priya", "Then I am bringing the plates and cups."),
    ("Sam", "Perfect, see you there."),
]
ASKED = {
    "What did Sam bake?": 1,
    "What did Priya bake?": 0,
    "What is Sam bringing?": 3,
    "What is Priya bringing?": 4,
}


@pytest.mark.req("quality:layouts")
def test_in_an_exchange_kept_without_names_a_question_finds_the_person_s_own_turn(tmp_path: Path) -> None:
    """Kept without names, the turn that speaks to Sam ("Hey Sam, I baked …") shares the most
    words with "What did Sam bake?" — but it is Priya's. Who wrote each turn is worked out from
    the exchange (engine.index.voices), so the answer is the same as when every turn names its
    writer."""
    found = {}
    for name, layout in (("plain", lambda who, said: said), ("named", lambda who, said: f"{who}: {said}")):
        with engine(tmp_path / name) as e:
            ids = [e.memory.remember(CALLER, layout(who, said)).id for who, said in EXCHANGE]
            e.settle()
            found[name] = {q: ids.index(e.recall.search(q, limit=3).hits[0].memory) for q in ASKED}
    assert found["plain"] == ASKED, found["plain"]
    assert found["named"] == ASKED, found["named"]
