"""The hybrid path's speed-ups change no answer (``perf:context-small``, issue 11).

``get_context`` embeds the query in a worker thread while the keyword searches run, and keeps the
last query vectors (engine/embed/recent.py). Over a real workspace and the real model, its replies
are the same, item for item and score for score, as those of the plain path (embedding first, in
the caller's thread, nothing kept), and a repeated query reaches the model once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.embed.base import Matrix, ProviderName, ProviderStatus, Vector
from engine.recall.context import Recall, RecallSettings
from tests.engine.index.helpers import CALLER, EMBEDDER, engine

NOTES = [
    "Mira: the garden beds need compost before the tomatoes go in.",
    "On 3 May 2026 Jonas said the kayak trip moves to the lake near the cabin.",
    "Mira booked piano lessons on Thursdays with a teacher from the conservatory.",
    "The bread starter lives in the fridge; feed it flour and water every Sunday.",
    "Jonas: chess club meets at the library, second floor, after work.",
    "Pottery class: the kiln fires on Fridays, glaze the bowls before then.",
    "We decided to host the frontend on the small VPS and keep Postgres on the big one.",
    "Birdwatching list: a heron by the river, two kingfishers, one buzzard over the field.",
]
QUERIES = [
    "What did Mira say about the garden?",
    "when is the kayak trip",
    "where do we host the frontend?",
    "Which birds did we see by the river?",
    "something nobody ever wrote about volcanoes",
]


class CountingQueries:
    """The real model, counting the queries it embeds."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    @property
    def provider(self) -> ProviderName:
        return EMBEDDER.provider

    @property
    def model_id(self) -> str:
        return EMBEDDER.model_id

    @property
    def dim(self) -> int:
        return EMBEDDER.dim

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return EMBEDDER.embed_documents(texts)

    def embed_query(self, text: str) -> Vector:
        self.queries.append(text)
        return EMBEDDER.embed_query(text)

    def probe(self) -> ProviderStatus:
        return EMBEDDER.probe()


def test_the_fast_hybrid_path_answers_exactly_as_the_plain_one(tmp_path: Path) -> None:
    counting = CountingQueries()
    with engine(tmp_path / "ws", counting) as e:
        for text in NOTES:
            e.memory.remember(CALLER, text)
        e.memory.save_memory(CALLER, "frontend", "hosted on", "the small VPS")
        e.memory.save_memory(CALLER, "Mira", "lessons", "piano on Thursdays")
        e.settle()
        fast = Recall(e.indexer)  # the defaults: overlapped embedding, recent query vectors kept
        plain = Recall(e.indexer, RecallSettings(overlap_embedding=False, recent_queries=0))
        assert fast.settings.overlap_embedding and fast.settings.recent_queries > 0

        counting.queries.clear()
        first = [fast.get_context(CALLER, q) for q in QUERIES]
        embedded = list(counting.queries)
        again = [fast.get_context(CALLER, q) for q in QUERIES]
        assert counting.queries == embedded, "a repeated query ran the model again"
        assert fast.recent.hits == len(QUERIES)
        reference = [plain.get_context(CALLER, q) for q in QUERIES]

        assert any(r["retrieval"] == "hybrid" and r["notes"] for r in reference)
        assert first == reference
        assert again == reference
