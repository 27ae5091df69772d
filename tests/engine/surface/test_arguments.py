"""Argument failures and unknown tools answer like every other refusal (engine:surface)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from engine.memory import Memory
from engine.store.workspace import Workspace
from engine.surface.arguments import argument_message, expected, unknown_tool_message
from engine.tools import build_server

MODES = ["legacy", "2026-07-28"]


def call(memory: Memory, mode: str, name: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(build_server(memory), mode=mode) as client:
            return await client.call_tool(name, args)

    return anyio.run(go)


def test_expected_types_are_said_in_words() -> None:
    assert expected({"type": "string"}) == "a string"
    assert expected({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == "a whole number"
    assert expected({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}) == (
        "a list of strings"
    )


def test_a_message_names_each_field_what_is_allowed_and_the_code() -> None:
    schema = {
        "properties": {"text": {"type": "string", "description": "The line"}, "date": {"type": "string"}},
        "required": ["text"],
    }
    errors: list[dict[str, Any]] = [
        {"loc": ("text",), "type": "missing"},
        {"loc": ("date",), "type": "string_type", "input": 3},
    ]
    message = argument_message("remember_note", schema, errors)
    assert message == (
        "remember_note: text is required: pass a string (The line); date must be a string, not a number. "
        "It takes (text, date?) [invalid_argument]"
    )
    assert unknown_tool_message("forget", ["b", "a"]) == (
        "there is no tool named 'forget': call one of a, b [unknown_tool]"
    )


@pytest.mark.req("engine:surface")
@pytest.mark.parametrize("mode", MODES)
def test_missing_wrong_typed_and_unknown_are_refusals_that_say_what_to_fix(
    memory: Memory, workspace: Workspace, mode: str
) -> None:
    missing = call(memory, mode, "remember", {})
    assert missing.is_error and missing.structured_content is None
    text = missing.content[0].text
    assert text.startswith("remember: statement is required: pass a string (The words to remember")
    assert text.endswith("[invalid_argument]")

    wrong = call(memory, mode, "get_context", {"max_tokens": "lots"})
    assert wrong.is_error
    assert "max_tokens must be a whole number, not a string (Reply budget in tokens, 100-4000" in (
        wrong.content[0].text
    )
    assert wrong.content[0].text.endswith("[invalid_argument]")

    tags = call(memory, mode, "remember", {"statement": "x", "tags": "infra"})
    assert "tags must be a list of strings, not a string" in tags.content[0].text

    unknown = call(memory, mode, "forget_memory", {"id": "nte_x"})
    assert unknown.is_error
    assert unknown.content[0].text == (
        "there is no tool named 'forget_memory': call one of get_context, memory_status, remember, "
        "remember_note, restore_memory, retire_memory, retrieve_memory, save_memory [unknown_tool]"
    )
    for result in (missing, wrong, tags, unknown):
        said = result.content[0].text
        assert "pydantic" not in said and "http" not in said and "validation error" not in said
    assert workspace.notes == {} and workspace.facts.records == {}
