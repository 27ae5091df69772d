"""get_context and memory_status through the real MCP client (in-process and over stdio)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from engine.embed.base import Matrix, ProviderStatus, Vector
from engine.embed.errors import ProviderNotSetUp
from engine.recall.budget import estimate_tokens
from engine.scope import Caller
from engine.store.model import State
from engine.tools import build_server
from tests.engine.index.helpers import CALLER, Engine, GatedEmbedder, engine


def call(e: Engine, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    server = build_server(e.memory, recall=e.recall)

    async def go() -> dict[str, Any]:
        async with Client(server) as client:
            result = await client.call_tool(tool, args)
            if result.is_error:
                return {"error": str(result.content)}
            data: dict[str, Any] = result.structured_content or {}
            return data

    return anyio.run(go)


def fits(reply: dict[str, Any], budget: int) -> bool:
    text = json.dumps(reply, ensure_ascii=False, separators=(",", ":"))
    return estimate_tokens(text) <= budget and reply["tokens"] <= budget


@pytest.mark.req("recall:get-context")
def test_get_context_through_the_mcp_client_facts_first_then_notes(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        e.memory.save_memory(CALLER, "Fjord", "database", "Postgres", "Fjord's database is Postgres")
        for i in range(16):
            e.memory.remember(
                CALLER, f"Fjord deploy note {i}: the Postgres migration step {i} " + "detail " * 60
            )
        big = e.memory.remember(CALLER, "Fjord Postgres tuning. " + "shared_buffers and work_mem " * 60)
        e.settle()
        reply = call(e, "get_context", {"query": "Fjord Postgres database"})
        assert reply["facts"][0]["object"] == "Postgres" and reply["facts"][0]["reason"] == "fact"
        assert reply["retrieval"] == "hybrid" and reply["relevant"] is True
        assert reply["notes"] and reply["dropped"]["count"] > 0 and reply["dropped"]["ids"]
        assert fits(reply, 800)
        scores = [n["score"] for n in reply["notes"]]
        assert scores == sorted(scores, reverse=True)
        for item in reply["notes"]:
            assert {"id", "kind", "text", "score", "reason", "source", "created", "scope", "tags"} <= set(
                item
            )
            assert len(item["text"]) <= 1000
        wide = call(e, "get_context", {"query": "Postgres tuning shared_buffers", "max_tokens": 4000})
        assert fits(wide, 4000)
        cut = next(n for n in wide["notes"] if n["id"] == big.id)
        assert cut["cut"] is True and len(cut["text"]) <= 1000
        no_query = call(e, "get_context", {})
        assert no_query["retrieval"] == "facts" and no_query["facts"] and not no_query["notes"]
        refused = call(e, "get_context", {"query": "x", "max_tokens": 5000})
        assert "max_tokens 5000 is above the maximum, 4000" in refused["error"]
        assert "[invalid_argument]" in refused["error"]
        small = call(e, "get_context", {"query": "x", "max_tokens": 99})
        assert "max_tokens 99 is below the minimum, 100" in small["error"]


@pytest.mark.req("recall:fresh-facts")
def test_a_fresh_write_is_found_by_its_words_before_embeddings_catch_up(tmp_path: Path) -> None:
    gated = GatedEmbedder()  # the background embedder is stuck
    with engine(tmp_path, gated, settle=False) as e:
        e.memory.save_memory(CALLER, "Tern", "release train", "Thursdays", "Tern ships on Thursdays")
        note = e.memory.remember(CALLER, "The zebrafish assay moved to room 4B")
        reply = call(e, "get_context", {"query": "zebrafish assay"})
        assert [n["id"] for n in reply["notes"]] == [note.id]
        assert call(e, "get_context", {"query": "Tern release train"})["facts"][0]["object"] == "Thursdays"
        gated.gate.set()


@pytest.mark.req("recall:honest-miss")
def test_nothing_close_means_relevant_false_and_only_the_nearest_items(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        for i in range(14):
            e.memory.remember(CALLER, f"Gardening log {i}: watered the tomatoes and pruned the roses")
        e.memory.remember(CALLER, "The quarterly budget review moved to Thursday")
        e.settle()
        floor = e.recall.settings.match_floor
        hit = call(e, "get_context", {"query": "when were the tomatoes watered?"})
        assert hit["relevant"] is True
        # near, not close: listed, but only the nearest ones that clear the floor, in their order
        question = "What did Priyanka say about the quarterly tax filing for the roses?"
        miss = call(e, "get_context", {"query": question, "max_tokens": 4000})
        assert miss["relevant"] is False and 0 < len(miss["notes"]) <= 10
        nearest = [h.memory for h in e.recall.search(question, floor=floor).hits if h.reason != "graph"][:10]
        assert [n["id"] for n in miss["notes"]] == nearest
        everything = [h.memory for h in e.recall.search(question).hits]
        assert len(everything) > len(nearest)  # the floor left the weakest out
        # nothing near at all: nothing is listed, however fresh the notes are
        far = call(e, "get_context", {"query": "Priyanka's passport renewal in Lisbon", "max_tokens": 4000})
        assert far["relevant"] is False and far["notes"] == [] and far["facts"] == []
        assert e.recall.search("Priyanka's passport renewal in Lisbon").hits  # there were nearest ones


@pytest.mark.req("recall:graph")
def test_a_note_linked_from_a_match_is_added_with_reason_graph(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        guide = tmp_path / "notes" / "Imported" / "wiki" / "Rollback Guide.md"
        guide.parent.mkdir(parents=True)
        guide.write_text(
            "---\nid: nte_guide\n---\nRun the playbook, then page the on-call.\n", encoding="utf-8"
        )
        assert e.indexer.scan_once()
        kestrel = e.memory.remember(CALLER, "The Kestrel outage was fixed by following [[Rollback Guide]].")
        e.settle()
        hits = e.recall.search("Kestrel outage", limit=1).hits
        assert [(h.memory, h.reason) for h in hits][:1] == [(kestrel.id, "both")]
        assert [(h.memory, h.reason) for h in hits[1:]] == [("nte_guide", "graph")]
        reply = call(e, "get_context", {"query": "Kestrel outage", "max_tokens": 2000})
        assert "nte_guide" in [n["id"] for n in reply["notes"]]


@pytest.mark.req("recall:graph")
def test_a_memory_sharing_a_rare_name_with_a_match_is_added_with_reason_graph(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        adopted = e.memory.remember(CALLER, "Tomás adopted a grey kitten from the shelter, named Pebble.")
        later = e.memory.remember(CALLER, "Pebble knocked the blue vase off the shelf again.")
        for i in range(12):
            e.memory.remember(CALLER, f"Standup {i}: Tomás reviewed the billing migration plan.")
        e.settle()
        hits = e.recall.search("Which kitten did Tomás adopt?", limit=1).hits
        assert hits[0].memory == adopted.id
        assert (later.id, "graph") in [(h.memory, h.reason) for h in hits[1:]]
        graph = [h.memory for h in hits if h.reason == "graph"]
        assert len(graph) == 1  # "Tomás" is in the query and in most memories: it links nothing


@pytest.mark.req("recall:scope")
def test_scope_rules_pinned_connections_retired_and_archived(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        e.memory.save_memory(CALLER, "Fjord", "database", "Postgres")
        e.memory.save_memory(CALLER, "Fjord", "database", "SQLite", scope="project:fjord")
        e.memory.remember(CALLER, "Fjord secret plan for the otter launch", scope="project:otter")
        e.memory.remember(CALLER, "Fjord harbour map for the otter launch, for every project")
        gone = e.memory.remember(CALLER, "Fjord retired idea about llamas")
        old = e.memory.remember(CALLER, "Fjord archived memo about walruses")
        e.memory.retire(CALLER, gone.id)
        with e.ws.lock:
            e.ws.move_note(old.id, State.ARCHIVED)
        e.settle()
        scoped = e.recall.get_context(CALLER, "Fjord database", scope="project:fjord")
        assert [f["object"] for f in scoped["facts"]] == ["SQLite"]
        assert "project:fjord" in scoped["facts"][0]["scope_note"]
        everywhere = e.recall.get_context(CALLER, "Fjord database")
        assert sorted(f["object"] for f in everywhere["facts"]) == ["Postgres", "SQLite"]
        pinned = Caller(client_name="t", pinned_scope="project:fjord", reads_unscoped=True)
        seen = e.recall.get_context(pinned, "Fjord otter launch")
        assert all(n["scope"] in (None, "project:fjord") for n in seen["notes"])
        assert any(n["scope"] is None for n in seen["notes"])
        assert [f["object"] for f in seen["facts"]] == ["SQLite"]
        narrow = Caller(client_name="t", pinned_scope="project:fjord")  # this scope only
        seen = e.recall.get_context(narrow, "Fjord otter launch llamas walruses database")
        assert seen["notes"] == []
        assert [(f["object"], f.get("scope_note")) for f in seen["facts"]] == [("SQLite", None)]
        ids = [
            n["id"] for n in e.recall.get_context(CALLER, "Fjord llamas walruses", max_tokens=4000)["notes"]
        ]
        assert gone.id not in ids and old.id not in ids
        cold = e.recall.get_context(CALLER, "walruses memo", include_archived=True)
        item = next(n for n in cold["notes"] if n["id"] == old.id)
        assert item["archived"] is True and "cold storage" in item["banner"]


@pytest.mark.req("recall:status")
def test_memory_status_reports_counts_bytes_backlog_provider_and_settings(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        e.memory.remember(CALLER, "one note")
        e.memory.save_memory(CALLER, "a", "b", "c")
        e.memory.remember_note(CALLER, "a log line")
        e.settle()
        status = call(e, "memory_status", {})
        assert status["counts"]["note"]["live"] == 1 and status["counts"]["fact"]["live"] == 1
        assert status["counts"]["log"]["live"] == 1
        assert status["storage_bytes"]["store"] > 0 and status["storage_bytes"]["index"] > 0
        assert status["index"]["waiting_for_embeddings"] == 0
        assert status["embedding"]["state"] == "ready" and status["embedding"]["notes"]
        assert status["settings"]["max_tokens_default"] == 800 and status["settings"]["facts_share"] == 0.5


@pytest.mark.req("recall:get-context")
def test_get_context_over_the_real_stdio_engine(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine", "--stdio", "--dir", str(tmp_path), "--embedding-provider", "off"],
    )

    async def go() -> dict[str, Any]:
        async with Client(params) as client:
            saved = await client.call_tool("remember", {"statement": "The heron nests by the north pier"})
            assert not saved.is_error
            with anyio.fail_after(60):
                result = await client.call_tool("get_context", {"query": "where does the heron nest?"})
            assert not result.is_error
            data: dict[str, Any] = result.structured_content or {}
            return data

    reply = anyio.run(go)
    assert reply["retrieval"] == "keyword" and "heron" in reply["notes"][0]["text"]


class NotSetUp(GatedEmbedder):
    """A provider that is chosen but not set up (Vertex without credentials): it embeds nothing."""

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        raise ProviderNotSetUp("no credentials")

    def embed_query(self, text: str) -> Vector:
        raise ProviderNotSetUp("no credentials")

    def probe(self) -> ProviderStatus:
        return ProviderStatus("vertex", "not_set_up", "text-embedding-005", 768, "no credentials")


@pytest.mark.req("embed:states", "recall:get-context")
def test_until_the_provider_is_ready_recall_finds_memories_by_their_words_only(tmp_path: Path) -> None:
    """What the Settings page says while a provider is not ready: get_context still answers, by
    keywords (its retrieval says so), and finds a memory by its words."""
    with engine(tmp_path, NotSetUp(), settle=False) as e:
        note = e.memory.remember(CALLER, "The staging database lives on kelp in eu-west-1.")
        reply = call(e, "get_context", {"query": "staging database kelp"})
    assert reply["retrieval"] == "keyword"
    assert [n["id"] for n in reply["notes"]] == [note.id]
