"""Cutting text to a budget always ends (a defect once made ``get_context`` spin forever)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters

from engine.recall import budget as budgeting

TEXT = st.text(st.characters(codec="utf-8"), max_size=3000) | st.sampled_from(
    ["X" + budgeting.CUT_MARK, budgeting.CUT_MARK, budgeting.CUT_MARK * 3, " " * 50, "ü" * 200]
)


@given(TEXT, st.integers(min_value=-5, max_value=3100))
def test_cut_text_always_fits_and_never_grows(text: str, limit: int) -> None:
    out, cut = budgeting.cut_text(text, limit)
    if len(text) <= max(limit, 0):
        assert (out, cut) == (text, False)
    else:
        assert cut and len(out) <= max(limit, 0) and len(out) < len(text)
        assert out == "" or out.endswith(budgeting.CUT_MARK)


@settings(max_examples=300)
@given(
    TEXT,
    st.lists(st.text(min_size=1, max_size=64), max_size=20),
    st.integers(min_value=-10, max_value=2000),
)
def test_squeeze_terminates_and_fits_or_drops(text: str, tags: list[str], allowance: int) -> None:
    item: dict[str, Any] = {
        "id": "nte_01M8N16DE4023GQ7VE9X9A8VJT",
        "kind": "note",
        "text": text,
        "tags": tags,
    }
    out = budgeting.squeeze(item, allowance)
    if out is not None:
        assert budgeting.json_tokens(out) + 1 <= allowance and out["cut"] is True
        assert len(out["text"]) <= len(text) and out["tags"] == tags[: len(out["tags"])]
        assert out["text"] or not text  # a cut keeps some of the words
        assert out != item
    else:  # not even the smallest form fits (or there is none)
        forms = list(budgeting.cut_forms(item))
        assert not forms or budgeting.json_tokens(forms[-1]) + 1 > allowance
        assert budgeting.smallest(item) == budgeting.json_tokens(forms[-1] if forms else item) + 1


def _context_after(note: dict[str, Any], query: str, max_tokens: int | None, root: Path) -> dict[str, Any]:
    """Save ``note`` and ask ``get_context`` through the real client against a real stdio engine."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine", "--stdio", "--dir", str(root), "--embedding-provider", "off"],
    )

    async def go() -> dict[str, Any]:
        async with Client(params) as client:
            saved = await client.call_tool("remember", note)
            assert not saved.is_error, saved.content
            args: dict[str, Any] = {"query": query}
            if max_tokens is not None:
                args["max_tokens"] = max_tokens
            with anyio.fail_after(30):  # it used to spin for good
                result = await client.call_tool("get_context", args)
            assert not result.is_error, result.content
            data: dict[str, Any] = result.structured_content or {}
            return data

    return anyio.run(go)


@pytest.mark.req("recall:budget-order")
def test_twenty_long_tags_and_a_tiny_budget_keep_the_note_cut(tmp_path: Path) -> None:
    tags = [f"{i:02d}" + "t" * 62 for i in range(20)]
    note = {"statement": "A zebra crossing by the school was repainted in May.", "tags": tags}
    reply = _context_after(note, "zebra", 100, tmp_path / "ws")
    assert reply["tokens"] <= 100
    (kept,) = reply["notes"]  # the newest relevant note: its tags are cut, never the promise
    assert kept["cut"] is True and kept["tags"] == tags[: len(kept["tags"])] and "zebra" in kept["text"]
    assert reply["dropped"]["count"] == 0


@pytest.mark.req("recall:budget-order")
def test_long_non_ascii_tags_at_the_default_budget_answer(tmp_path: Path) -> None:
    tags = [f"{i:02d}" + "ж" * 62 for i in range(20)]
    note = {"statement": "A zebra herd crossed the river at dawn. " * 20, "tags": tags}
    reply = _context_after(note, "zebra", None, tmp_path / "ws")
    assert reply["tokens"] <= 800
    kept = [n for n in reply["notes"] if "zebra" in n["text"]]
    assert kept == [] or kept[0].get("cut") is True
    assert len(kept) + reply["dropped"]["count"] >= 1
