"""A chunk's stored vector: its own words' vector blended with its words read among its
neighbours' (``engine.index.vectors.contextual_vector``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.index.vectors import OWN_WEIGHT, contextual_vector, unit
from tests.engine.index.helpers import CALLER, EMBEDDER, GatedEmbedder, engine


def _vec(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def test_the_blend_is_a_unit_vector_between_the_two_readings() -> None:
    own, context = _vec(1, 0, 0), _vec(0, 3, 0)  # lengths do not matter: both are read as units
    blended = contextual_vector(own, context)
    assert float(np.linalg.norm(blended)) == pytest.approx(1.0, abs=1e-6)
    # the cosine to a query is the weighted sum of the two readings' cosines, rescaled to a unit
    for query in (_vec(1, 0, 0), _vec(0, 1, 0), unit(_vec(1, 2, 0.5))):
        q = unit(query)
        mixed = OWN_WEIGHT * float(q @ unit(own)) + (1 - OWN_WEIGHT) * float(q @ unit(context))
        scale = float(np.linalg.norm(OWN_WEIGHT * unit(own) + (1 - OWN_WEIGHT) * unit(context)))
        assert float(q @ blended) == pytest.approx(mixed / scale, abs=1e-6)


def test_the_weight_moves_the_blend_from_the_context_to_the_own_words() -> None:
    own, context = _vec(1, 0), _vec(0, 1)
    assert contextual_vector(own, context, 1.0) == pytest.approx(own)
    assert contextual_vector(own, context, 0.0) == pytest.approx(context)
    query = own  # a query about what the chunk itself says
    assert float(query @ contextual_vector(own, context)) > float(query @ unit(context))


def test_a_chunk_without_neighbours_keeps_its_own_vector() -> None:
    v = _vec(0.2, -0.5, 0.1)
    assert contextual_vector(v, v) == pytest.approx(unit(v))


@pytest.mark.req("engine:index")
def test_a_written_memory_is_stored_with_its_blended_vector_and_both_texts_are_cached(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        alone = e.memory.remember(CALLER, "Our staging database lives in Frankfurt.")
        e.clock.now = e.clock.now.replace(year=e.clock.now.year + 1)  # a new sitting: no neighbours
        first = e.memory.remember(CALLER, "Guess what, I signed up for a pottery class!")
        middle = e.memory.remember(CALLER, "It starts on Monday, twice a week.")
        e.memory.remember(CALLER, "That sounds like a lot of fun.")
        e.settle()
        db = e.indexer.db
        rows = {
            memory: (rowid, text, embedded)
            for rowid, memory, text, embedded in db.db.execute(
                "SELECT id, memory, text, embed_text FROM chunks WHERE chunk = 0"
            )
        }
        stored = db.reader.chunk_vectors([rows[alone.id][0], rows[middle.id][0]])

        _, text, embedded = rows[alone.id]
        assert embedded == text  # no neighbours: one text, its own vector
        assert stored[rows[alone.id][0]] == pytest.approx(unit(EMBEDDER.embed_documents([text])[0]), abs=1e-5)

        rowid, text, embedded = rows[middle.id]
        assert embedded != text and text in embedded
        own, read = EMBEDDER.embed_documents([text, embedded])
        assert stored[rowid] == pytest.approx(contextual_vector(own, read), abs=1e-5)
        assert {text, embedded} <= db.texts()  # both stay in the cache through a forget
        assert e.indexer.cache is not None
        assert {text, embedded} <= set(e.indexer.cache.get_many(EMBEDDER.model_id, [text, embedded]))
        assert first.id in rows


@pytest.mark.req("engine:index")
def test_a_new_neighbour_re_embeds_only_the_contextual_reading(tmp_path: Path) -> None:
    gated = GatedEmbedder()
    gated.gate.set()
    with engine(tmp_path, gated) as e:
        e.memory.remember(CALLER, "Guess what, I signed up for a pottery class!")
        e.settle()
        before = list(gated.waiting)
        assert before == ["Guess what, I signed up for a pottery class!"]  # no neighbours yet
        e.memory.remember(CALLER, "It starts on Monday, twice a week.")
        e.settle()
        fresh = gated.waiting[len(before) :]
        # the two readings among neighbours are the same text ("first \n second"), embedded once;
        # the second memory's own words are new; the first one's own words come from the cache
        first, second = before[0], "It starts on Monday, twice a week."
        assert sorted(fresh) == sorted([f"{first}\n{second}", second])
