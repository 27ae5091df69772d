"""The hybrid path's speed-ups change no answer (``perf:context-small``).

``get_context`` embeds the query in a worker thread while the keyword searches run, and keeps the
last query vectors (engine/embed/recent.py); a kept vector is used at once, with no hop to the
worker thread. Keyword coverage keeps the words of the last bodies it read and the packer the
price of the ids it priced (engine/recall/lexical.py, budget.py). Over a real workspace and the
real model, its replies are the same, item for item and score for score, as those of the plain
path (embedding first, in the caller's thread, nothing kept), a repeated query reaches the model
once, and warm caches answer as cold ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from engine.embed.base import Matrix, ProviderName, ProviderStatus, Vector
from engine.recall import budget, context, lexical
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


class CountingPool:
    """The worker pool, counting what is handed to it."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        self.submitted += 1
        return self.pool.submit(fn, *args)


def test_a_kept_query_vector_skips_the_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = CountingQueries()
    pool = CountingPool(context._pool())
    monkeypatch.setattr(context, "_pool", lambda: pool)
    with engine(tmp_path / "ws", counting) as e:
        for text in NOTES:
            e.memory.remember(CALLER, text)
        e.settle()
        fast = Recall(e.indexer)
        first = [fast.get_context(CALLER, q) for q in QUERIES]
        assert pool.submitted == len(QUERIES)  # each new query embedded in the worker thread
        again = [fast.get_context(CALLER, q) for q in QUERIES]
        assert pool.submitted == len(QUERIES), "a kept vector went through the worker thread"
        assert again == first and len(counting.queries) == len(QUERIES)


def test_warm_caches_answer_as_cold_ones(tmp_path: Path) -> None:
    def cold(recall: Recall, query: str) -> dict[str, Any]:
        lexical._read.cache_clear()
        budget._id_cost.cache_clear()
        return recall.get_context(CALLER, query, max_tokens=300)

    with engine(tmp_path / "ws", EMBEDDER) as e:
        for text in NOTES:
            e.memory.remember(CALLER, text)
        e.settle()
        plain = Recall(e.indexer, RecallSettings(overlap_embedding=False, recent_queries=0))
        reference = [cold(plain, q) for q in QUERIES]
        warm = [plain.get_context(CALLER, q, max_tokens=300) for q in QUERIES * 2]
        assert warm == reference * 2
        assert any(r["dropped"]["count"] for r in reference)  # the packer trimmed (priced ids)
        assert lexical._read.cache_info().hits > 0 and budget._id_cost.cache_info().hits > 0

        e.memory.remember(CALLER, "Mira: the garden beds need compost and lime before the tomatoes.")
        e.settle()
        after = [plain.get_context(CALLER, q, max_tokens=300) for q in QUERIES]
        assert after == [cold(plain, q) for q in QUERIES]
        assert after != reference  # the new memory is found: nothing stale was kept
