"""The <memory> block: wording, the per-memory and per-block caps, honest misses (host:turn-loop)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from almanac.host import PREAMBLE, Endpoint, HostSettings, MemoryProvider, memory_block
from engine.memory import Memory
from engine.scope import Caller
from engine.store.workspace import Workspace

pytestmark = pytest.mark.req("host:turn-loop")
CALLER = Caller(client_name="test")


def reply(*texts: str, relevant: bool = True) -> dict[str, Any]:
    return {
        "facts": [],
        "notes": [{"id": f"n{i}", "text": t} for i, t in enumerate(texts)],
        "relevant": relevant,
    }


def test_the_block_tells_the_model_to_use_and_not_cite() -> None:
    block = memory_block(reply("The user prefers tabs."))
    assert block.startswith("<memory>\n") and block.endswith("</memory>")
    assert PREAMBLE in block and "do not cite" in PREAMBLE
    assert "- The user prefers tabs.\n" in block


def test_facts_come_before_notes_in_the_reply_order() -> None:
    context = {
        "facts": [{"text": "Fjord uses Postgres"}],
        "notes": [{"text": "second"}, {"text": "third"}],
        "relevant": True,
    }
    block = memory_block(context)
    assert block.index("Fjord uses Postgres") < block.index("second") < block.index("third")


def test_one_memory_is_cut_at_1000_characters() -> None:
    block = memory_block(reply("x" * 5_000))
    (line,) = [ln for ln in block.splitlines() if ln.startswith("- ")]
    assert len(line) == 2 + 1_000 and line.endswith("…")


def test_a_memory_at_the_limit_is_not_cut() -> None:
    block = memory_block(reply("y" * 1_000))
    assert "y" * 1_000 + "\n" in block and "…" not in block


def test_the_block_never_exceeds_8000_characters() -> None:
    block = memory_block(reply(*[f"{i} " + "z" * 2_000 for i in range(30)]))
    assert len(block) <= 8_000
    assert block.count("\n- ") == 7  # seven memories of 1,000 characters fit with the wrapper


def test_a_shorter_memory_still_fits_after_a_long_one_does_not() -> None:
    block = memory_block(
        reply("a" * 900, "b" * 900, "short one"), max_item_chars=1_000, max_block_chars=1_200
    )
    assert "short one" in block and "b" * 900 not in block and len(block) <= 1_200


@pytest.mark.parametrize(
    "context",
    [
        reply("The user prefers tabs.", relevant=False),  # only the nearest, not matches
        reply(),
        {"facts": [], "notes": [], "relevant": True},
        {"relevant": True, "notes": [{"text": "   "}]},
        {},
    ],
)
def test_nothing_relevant_gives_no_block(context: dict[str, Any]) -> None:
    assert memory_block(context) == ""


@pytest.mark.req("life:archive")
def test_an_archived_memory_starts_with_its_banner_once() -> None:
    banner = "> **⚠️ From cold storage — this was true at one time, but it may not be true now.**"
    context = {
        "facts": [],
        "notes": [
            {"text": "later words of a long archived note", "archived": True, "banner": banner},
            {"text": f"{banner}\n> Archived 2026-08-28; unverified since.\n\nFirst words", "archived": True},
            {"text": "an old engine's archived item", "archived": True},
            {"text": "a live memory"},
        ],
        "relevant": True,
    }
    block = memory_block(context)
    assert f"- {banner}\n  later words of a long archived note\n" in block
    assert block.count(banner) == 3  # each archived memory once, the live one never
    assert f"- {banner}\n  an old engine's archived item\n" in block
    assert "- a live memory\n" in block


@pytest.mark.anyio
async def test_the_block_holds_nothing_below_the_floor(tmp_path: Path) -> None:
    """Against a real local engine (keyword recall, so a match's confidence is its coverage): a
    memory that shares one word of seven with the message is a match, below the floor."""
    ws = tmp_path / "ws"
    store = Workspace(ws)
    store.open()
    try:
        memory = Memory(store)
        memory.remember(CALLER, "Watered the tomatoes, pruned the roses and trimmed the hedges by the shed.")
        memory.remember(CALLER, "The shed key hangs by the back door.")
    finally:
        store.close()
    message = "When were the tomatoes watered, the roses pruned and the hedges trimmed near the shed?"
    argv = ("-m", "engine", "--stdio", "--dir", str(ws), "--embedding-provider", "off")
    settings = HostSettings(enabled=True, auto_save=False, load_timeout=20)

    async def block() -> str:
        async with MemoryProvider(Endpoint(command=(sys.executable, *argv)), settings) as provider:
            return await provider.before_turn(message)

    floored = await block()
    assert "Watered the tomatoes" in floored and "shed key" not in floored
    (ws / "settings.json").write_text(json.dumps({"match_floor": 0.0}), encoding="utf-8")
    assert "shed key" in await block()  # the floor, and nothing else, kept it out
