"""The whole ``get_context`` reply fits ``max_tokens`` (``recall:budget-order``, ``recall:get-context``).

A property over random stores written through the real MCP client — facts, notes, archived notes
(moved by the engine and by hand), long and non-ASCII tags and texts, many matches to list — asked
at budgets from below the minimum to 8,000: a budget outside 100…4,000 is refused with
``invalid_argument`` naming the limit; inside it the reply's compact JSON never exceeds the budget
by the documented estimate, its own ``tokens`` is never below what it uses, the call never hangs,
and the newest relevant note is kept whenever its smallest cut form fits beside the envelope.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import Client

from engine.recall import budget as budgeting
from engine.store.model import State
from engine.tools import build_server
from tests.engine.index.helpers import engine

KEY = "quokkaplan"  # the query's one word: no generated text contains it
MIN, MAX = 100, 4000

WORDS = st.text(st.characters(codec="utf-8", categories=("L", "N", "Zs", "P", "S")), min_size=1, max_size=900)
SAID = WORDS.filter(str.strip)  # text a memory may be: not blank (a blank one is refused, by design)
TAG = st.text(st.characters(codec="utf-8", categories=("L", "N")), min_size=1, max_size=64)
TAGS = st.lists(TAG, max_size=20, unique_by=str.casefold)
SCOPE = st.none() | st.sampled_from(["project:fjord", "p" * 60 + ":abc"])


@st.composite
def stores(draw: st.DrawFn) -> dict[str, Any]:
    return {
        # facts that match the query, many of them: with the notes, more ids than a reply names
        "facts": draw(
            st.lists(
                st.tuples(SAID.map(lambda w: w[:60]).filter(str.strip), WORDS.map(lambda w: w[:200])),
                max_size=10,
            )
        ),
        "notes": draw(
            st.lists(
                st.tuples(SAID, TAGS, SCOPE, st.booleans(), st.sampled_from(["live", "moved", "by hand"])),
                max_size=6,
            )
        ),
        # short notes with the key word; with the others, fewer than a search's 20 notes, so every
        # note is a match (the newest relevant one among them)
        "matches": draw(st.integers(0, 12)),
        "newest": (draw(WORDS), draw(TAGS)),  # written last, with the key word: the newest relevant note
        "budgets": draw(st.lists(st.integers(0, 8000), min_size=4, max_size=7)),
        "archived": draw(st.booleans()),
    }


def envelope_cost(budget: int, items: int) -> int:
    """What the reply costs with no items: as counted by the engine, at most this."""
    return budgeting.json_tokens(
        {
            "facts": [],
            "notes": [],
            "retrieval": "semantic",
            "relevant": False,
            "tokens": budget,
            "dropped": {"count": items, "ids": []},
        }
    )


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.req("recall:budget-order")
@pytest.mark.req("recall:get-context")
@settings(
    max_examples=12,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking a store of real engines takes minutes
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(store=stores())
def test_every_reply_fits_its_budget_and_keeps_the_newest_relevant_note(store: dict[str, Any]) -> None:
    budgets = sorted({MIN - 1, MIN, MAX, MAX + 1, 8000, *store["budgets"]})
    with tempfile.TemporaryDirectory() as tmp, engine(Path(tmp) / "ws") as e:
        server = build_server(e.memory, recall=e.recall)

        async def go() -> None:
            async with Client(server) as client:

                async def call(tool: str, args: dict[str, Any]) -> Any:
                    with anyio.fail_after(60):  # never hangs
                        return await client.call_tool(tool, args)

                for subject, value in store["facts"]:
                    fact = {"subject": subject, "predicate": "is", "object": f"{value} {KEY}"}
                    assert not (await call("save_memory", fact)).is_error
                moved: list[tuple[str, str]] = []
                for text, tags, scope, key, how in store["notes"]:
                    words = f"{text} {KEY}" if key else text
                    args: dict[str, Any] = {"statement": words, "tags": tags or None, "scope": scope}
                    saved = await call("remember", args)
                    assert not saved.is_error, _text(saved)
                    moved.append((saved.structured_content["id"], how))
                for i in range(store["matches"]):
                    await call("remember", {"statement": f"{KEY} checklist item {i} ü"})
                text, tags = store["newest"]
                newest = await call("remember", {"statement": f"{text} {KEY} {text}", "tags": tags or None})
                newest_id = newest.structured_content["id"]
                for memory_id, how in moved:
                    if how == "moved":  # as the sweep and the owner move it
                        with e.ws.lock:
                            e.ws.move_note(memory_id, State.ARCHIVED)
                    elif how == "by hand":  # a file moved into archive/ without its banner
                        record = e.ws.notes[memory_id]
                        target = e.ws.root / "archive" / record.rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        os.rename(e.ws.note_path(record), target)
                e.indexer.scan_once()
                e.settle()
                wide = await call(
                    "get_context", {"query": KEY, "max_tokens": MAX, "include_archived": store["archived"]}
                )
                assert not wide.is_error, _text(wide)
                found = [n for n in wide.structured_content["notes"] if n["id"] == newest_id]
                assert found, "the newest relevant note is listed when the largest budget holds everything"
                whole = found[0]
                smallest = budgeting.smallest(whole)
                for budget in budgets:
                    args = {"query": KEY, "max_tokens": budget, "include_archived": store["archived"]}
                    result = await call("get_context", args)
                    if not MIN <= budget <= MAX:
                        limit = f"below the minimum, {MIN}" if budget < MIN else f"above the maximum, {MAX}"
                        assert (
                            result.is_error
                            and limit in _text(result)
                            and "[invalid_argument]" in _text(result)
                        )
                        continue
                    assert not result.is_error, _text(result)
                    reply: dict[str, Any] = result.structured_content
                    used = budgeting.estimate_tokens(
                        json.dumps(reply, ensure_ascii=False, separators=(",", ":"))
                    )
                    assert used <= reply["tokens"] <= budget
                    items = len(reply["facts"]) + len(reply["notes"]) + reply["dropped"]["count"]
                    assert len(reply["dropped"]["ids"]) <= min(
                        reply["dropped"]["count"], budgeting.MAX_DROPPED_IDS
                    )
                    kept = [n for n in reply["notes"] if n["id"] == newest_id]
                    if envelope_cost(budget, items) + smallest <= budget:
                        assert kept, f"the newest relevant note was dropped at {budget} tokens"
                    if kept and (kept[0]["text"], kept[0]["tags"]) != (whole["text"], whole["tags"]):
                        assert kept[0]["cut"] is True
                    for item in reply["notes"]:
                        if item.get("archived"):
                            assert store["archived"] and "cold storage" in item["banner"]

        anyio.run(go)
