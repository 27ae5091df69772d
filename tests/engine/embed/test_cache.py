"""The embedding cache: (model id, text hash) → vector, in a SQLite file that outlives the index."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from engine.embed.base import Matrix, ProviderName, ProviderStatus, Vector, l2_normalize
from engine.embed.cache import EmbeddingCache, embed_documents_cached
from engine.embed.errors import CacheError


def unit(seed: int, dim: int = 4) -> Vector:
    row: Vector = l2_normalize(np.random.default_rng(seed).normal(size=(1, dim)))[0]
    return row


@pytest.mark.req("embed:model-id")
def test_round_trip_and_survival_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.db"
    with EmbeddingCache(path) as cache:
        assert cache.journal_mode == "wal"
        assert cache.put_many("model-a", 4, [("alpha", unit(1)), ("beta", unit(2))]) == 2
        assert cache.get_many("model-a", ["alpha", "gamma"]).keys() == {"alpha"}
    with EmbeddingCache(path) as cache:
        got = cache.get_many("model-a", ["alpha", "beta", "gamma"])
        assert got.keys() == {"alpha", "beta"}
        assert got["beta"].dtype == np.float32 and np.array_equal(got["beta"], unit(2))
        assert cache.count() == 2 and cache.count("model-a") == 2


@pytest.mark.req("embed:model-id")
def test_models_never_mix(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.db") as cache:
        cache.put_many("model-a", 4, [("same text", unit(1))])
        cache.put_many("model-b", 8, [("same text", unit(2, dim=8))])
        assert cache.get_many("model-a", ["same text"])["same text"].shape == (4,)
        assert cache.get_many("model-b", ["same text"])["same text"].shape == (8,)
        assert cache.get_many("model-c", ["same text"]) == {}
        with pytest.raises(ValueError, match="dim"):
            cache.put_many("model-a", 4, [("x", unit(3, dim=8))])


@pytest.mark.req("embed:model-id")
def test_put_replaces_and_many_keys_are_chunked(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.db") as cache:
        cache.put_many("m", 4, [("t", unit(1))])
        cache.put_many("m", 4, [("t", unit(2))])
        assert np.array_equal(cache.get_many("m", ["t"])["t"], unit(2))
        texts = [f"text {i}" for i in range(1200)]
        cache.put_many("m", 4, ((t, unit(i)) for i, t in enumerate(texts)))
        assert len(cache.get_many("m", texts)) == 1200


def test_a_cache_from_a_newer_almanac_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    EmbeddingCache(path).close()
    import apsw

    db = apsw.Connection(str(path))
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(CacheError, match="delete the file"):
        EmbeddingCache(path)


def test_an_unopenable_file_is_a_cache_error(tmp_path: Path) -> None:
    with pytest.raises(CacheError):
        EmbeddingCache(tmp_path / "no-such-dir" / "c.db")


class CountingEmbedder:
    """A deterministic test embedder that counts which texts reach the provider."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @property
    def provider(self) -> ProviderName:
        return "local"

    @property
    def model_id(self) -> str:
        return "counting"

    @property
    def dim(self) -> int:
        return 4

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        self.seen.extend(texts)
        return np.stack([unit(len(t)) for t in texts]) if texts else np.zeros((0, 4), np.float32)

    def embed_query(self, text: str) -> Vector:
        row: Vector = self.embed_documents([text])[0]
        return row

    def probe(self) -> ProviderStatus:
        return ProviderStatus("local", "ready", "counting", 4)


@pytest.mark.req("embed:model-id")
def test_embedding_through_the_cache_calls_the_provider_once_per_text(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    with EmbeddingCache(tmp_path / "c.db") as cache:
        first = embed_documents_cached(embedder, cache, ["a", "bb", "a"])
        assert embedder.seen == ["a", "bb"]
    with EmbeddingCache(tmp_path / "c.db") as cache:  # e.g. after the index was deleted and rebuilt
        again = embed_documents_cached(embedder, cache, ["bb", "a", "ccc"])
    assert embedder.seen == ["a", "bb", "ccc"]
    assert np.array_equal(first[1], again[0]) and np.array_equal(first[0], again[1])
    assert again.shape == (3, 4)
