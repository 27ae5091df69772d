"""``get_context`` keeps the search's ranking (``recall:budget-order``).

Real parts: a workspace on disk, the real embedder, the engine's MCP server and the real ``mcp``
client. The notes ``get_context`` returns are the search's hits in the search's order; with a
small budget the kept notes are still in that order, and a better match leaves only when it
could not fit beside the better ones kept.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from engine.recall import budget as budgeting
from engine.tools import build_server
from tests.engine.index.helpers import CALLER, engine

TOPICS = ["garden", "piano", "kayak", "bread", "chess", "pottery", "cycling", "birds"]
QUERY = "What did Mira say about the garden, the piano lessons and the kayak trip?"


def _notes() -> list[str]:
    """Memories of mixed lengths that share the query's words to different degrees."""
    out = []
    for i in range(30):
        topic, other = TOPICS[i % len(TOPICS)], TOPICS[(i * 3 + 1) % len(TOPICS)]
        who = "Mira" if i % 3 else "Jonas"
        tail = " It rained most of the afternoon, so plans moved indoors." * (i % 4)
        out.append(f"{who} talked about the {topic} and a little about {other} on day {i}.{tail}")
    return out


def _get_context(server: Any, args: dict[str, Any]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with Client(server) as client:
            result = await client.call_tool("get_context", args)
            assert not result.is_error, result.content
            data: dict[str, Any] = result.structured_content or {}
            return data

    return anyio.run(go)


@pytest.mark.req("recall:budget-order")
def test_get_context_returns_the_searchs_ranking_and_drops_from_its_tail(tmp_path: Path) -> None:
    with engine(tmp_path / "ws") as e:
        for text in _notes():
            e.memory.remember(CALLER, text)
        e.settle()
        server = build_server(e.memory, recall=e.recall)
        searched = e.recall.search(QUERY, limit=10)
        top10 = [h.memory for h in searched.hits if h.reason != "graph"][:10]
        assert searched.relevant and len(top10) == 10

        full = _get_context(server, {"query": QUERY, "max_tokens": 4000})
        assert [n["id"] for n in full["notes"]][:10] == top10  # same ten, same order
        scores = [n["score"] for n in full["notes"]]
        assert scores == sorted(scores, reverse=True)  # best first, graph items included
        first_graph = next((i for i, n in enumerate(full["notes"]) if n["reason"] == "graph"), None)
        if first_graph is not None:
            assert all(n["reason"] == "graph" for n in full["notes"][first_graph:])

        rank = {n["id"]: i for i, n in enumerate(full["notes"])}
        size = {n["id"]: budgeting.json_tokens(n) + 1 for n in full["notes"]}
        small = _get_context(server, {"query": QUERY, "max_tokens": 400})
        kept = [n["id"] for n in small["notes"]]
        assert small["tokens"] <= 400 and small["dropped"]["count"] > 0
        assert kept == sorted(kept, key=rank.__getitem__)  # still in ranking order
        worst_kept = max(rank[k] for k in kept)
        for gone in small["dropped"]["ids"]:
            if rank[gone] < worst_kept:  # a better match left: it could not have fit
                assert size[gone] > 400 - small["tokens"]


@pytest.mark.req("recall:budget-order")
@pytest.mark.req("recall:honest-miss")
def test_a_match_below_the_floor_does_not_come_back_as_a_graph_item(tmp_path: Path) -> None:
    # "Zephyrine" is a rare name: the best match mentions it, so graph expansion follows it to the
    # other memory that does — also a search match, ranked second, but far too weak to clear the
    # floor. Listed anyway, as a graph item after everything else, it leaked a match the floor
    # leaves out, out of the ranking's order.
    with engine(tmp_path / "ws") as e:
        best = e.memory.remember(CALLER, "Orla baked a pear tart for the harvest fair with Zephyrine.").id
        e.clock.now += timedelta(days=3)  # another sitting: not each other's neighbours
        weak = e.memory.remember(CALLER, "Zephyrine renewed the car insurance policy online.").id
        e.settle()
        question = "Which pear tart was baked for the harvest fair?"
        ranking = [h.memory for h in e.recall.search(question).hits]
        assert ranking == [best, weak]  # both are search matches, in this order
        floored = e.recall.search(question, floor=e.recall.settings.match_floor)
        assert [h.memory for h in floored.hits] == [best]  # the weak one is below the floor
        listed = [n["id"] for n in e.recall.get_context(CALLER, question)["notes"]]
        assert listed == [best]
        assert listed == [m for m in ranking if m in listed]  # the ranking's order
