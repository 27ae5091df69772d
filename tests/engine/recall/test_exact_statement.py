"""An exact statement is listed by ``get_context`` among many similar notes while the index
catches up (``recall:fresh-facts``, ``recall:get-context``).

Real parts: a workspace on disk, the real index, the real embedder. The shape of a workspace in use
for a while — hundreds of near-identical pages, written hours before the same day and embedded —
then a burst of writes whose vectors are not made yet (the background embedder held at a gate, as
on a loaded host). Scored as if its meaning were the furthest of all, the exact statement fell
below twenty pages that share none of its words (their meaning min-max-scaled to the top) and out
of the reply. A memory without a vector has its keyword score stand in for its meaning score until
it is embedded, so the exact statement leads the reply.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.engine.index.helpers import CALLER, GatedEmbedder, engine

PAGES = 240  # well above get_context's window of 20 notes


@pytest.mark.req("recall:fresh-facts")
def test_an_exact_statement_leads_get_context_before_its_vector_is_made(tmp_path: Path) -> None:
    gated = GatedEmbedder()
    gated.gate.set()
    with engine(tmp_path / "ws", gated, settle=False) as e:
        start = e.clock.now
        # the pages: the same day (one session with the burst), hours before (no one's neighbours)
        e.clock.now = start - timedelta(hours=9)
        for i in range(PAGES):
            e.memory.remember(CALLER, f"Seeded page {i}: {'pebble drift ' * 12}")
        e.clock.now = start
        first = e.memory.remember(CALLER, "the quarry entry 00001 stands")
        assert e.indexer.wait_idle(600), "background indexing did not finish"
        gated.gate.clear()  # the burst's vectors wait
        try:
            second = e.memory.remember(CALLER, "the quarry entry 00002 stands")
            reply = e.recall.get_context(CALLER, "the quarry entry 00002 stands")
            assert reply["retrieval"] == "hybrid" and reply["relevant"] is True
            listed = [n["id"] for n in reply["notes"]]
            assert listed[:1] == [second.id], [n["text"][:40] for n in reply["notes"]]
            assert first.id in listed  # the near twin follows, the pages after it
            searched = [h.memory for h in e.recall.search("the quarry entry 00002 stands").hits]
            assert listed == [m for m in searched if m in listed]  # get_context keeps the ranking's order
        finally:
            gated.gate.set()
