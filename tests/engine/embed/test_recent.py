"""Recent query vectors (engine/embed/recent.py): one model call per repeated query, bounded, per model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from engine.embed.base import Matrix, ProviderName, ProviderStatus, Vector, l2_normalize
from engine.embed.recent import RecentQueries


class Counting:
    """A deterministic embedder (a vector from the text's bytes) that records each query it embeds."""

    def __init__(self, model: str = "m1") -> None:
        self.model = model
        self.queries: list[str] = []
        self.fail = False

    @property
    def provider(self) -> ProviderName:
        return "local"

    @property
    def model_id(self) -> str:
        return self.model

    @property
    def dim(self) -> int:
        return 8

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        rows = np.zeros((len(texts), 8), dtype=np.float32)
        for i, text in enumerate(texts):
            for j, byte in enumerate(f"{self.model}:{text}".encode()):
                rows[i, j % 8] += byte
        return l2_normalize(rows)

    def embed_query(self, text: str) -> Vector:
        if self.fail:
            raise RuntimeError("provider down")
        self.queries.append(text)
        row: Vector = self.embed_documents([text])[0]
        return row

    def probe(self) -> ProviderStatus:
        return ProviderStatus("local", "ready", self.model, 8)


def test_a_repeated_query_reaches_the_model_once() -> None:
    embedder, recent = Counting(), RecentQueries(4)
    first = recent.vector(embedder, "where do we host the frontend?")
    again = recent.vector(embedder, "where do we host the frontend?")
    assert embedder.queries == ["where do we host the frontend?"]
    assert np.array_equal(first, again)
    assert np.array_equal(first, embedder.embed_query("where do we host the frontend?"))
    assert (recent.hits, recent.misses) == (1, 1)
    with pytest.raises(ValueError):
        again[0] = 1.0  # shared between callers: read-only


def test_the_exact_text_is_the_key() -> None:
    embedder, recent = Counting(), RecentQueries(4)
    for text in ("Deploy plan", "deploy plan", "Deploy plan ", "Deploy plan"):
        recent.vector(embedder, text)
    assert embedder.queries == ["Deploy plan", "deploy plan", "Deploy plan "]


def test_another_model_never_gets_a_vector_of_the_last_one() -> None:
    embedder, recent = Counting("m1"), RecentQueries(4)
    old = recent.vector(embedder, "deploy plan")
    embedder.model = "m2"
    new = recent.vector(embedder, "deploy plan")
    assert embedder.queries == ["deploy plan", "deploy plan"]
    assert not np.array_equal(old, new)
    assert np.array_equal(new, recent.vector(embedder, "deploy plan")) and len(embedder.queries) == 2


def test_it_keeps_the_most_recently_used_and_no_more() -> None:
    embedder, recent = Counting(), RecentQueries(2)
    recent.vector(embedder, "a")
    recent.vector(embedder, "b")
    recent.vector(embedder, "a")  # a is now the most recent
    recent.vector(embedder, "c")  # b goes
    assert len(recent) == 2
    embedder.queries.clear()
    recent.vector(embedder, "a")
    recent.vector(embedder, "c")
    recent.vector(embedder, "b")
    assert embedder.queries == ["b"]


def test_a_failed_embedding_is_not_remembered() -> None:
    embedder, recent = Counting(), RecentQueries(4)
    embedder.fail = True
    with pytest.raises(RuntimeError, match="provider down"):
        recent.vector(embedder, "deploy plan")
    embedder.fail = False
    recent.vector(embedder, "deploy plan")
    assert embedder.queries == ["deploy plan"] and len(recent) == 1


def test_size_zero_keeps_nothing() -> None:
    embedder, recent = Counting(), RecentQueries(0)
    recent.vector(embedder, "deploy plan")
    recent.vector(embedder, "deploy plan")
    assert embedder.queries == ["deploy plan", "deploy plan"] and len(recent) == 0
    with pytest.raises(ValueError, match="size"):
        RecentQueries(-1)


def test_get_answers_from_what_is_kept_and_never_embeds() -> None:
    embedder, recent = Counting(), RecentQueries(4)
    assert recent.get("m1", "frontend?") is None
    assert (recent.hits, recent.misses) == (0, 0)
    kept = recent.vector(embedder, "frontend?")
    found = recent.get("m1", "frontend?")
    assert found is kept and recent.get("m2", "frontend?") is None
    assert embedder.queries == ["frontend?"] and (recent.hits, recent.misses) == (1, 1)
