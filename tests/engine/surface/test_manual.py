"""The agent's-eye test: the tools as a client lists them, and a session that does what they promise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from engine.memory import Memory
from engine.surface.manual import WRITE_TOOLS
from engine.tools import build_server
from tests.engine.support import stdio_client

READ_TOOLS = {"retrieve_memory", "get_context", "memory_status"}
NEIGHBOURS = {  # a tool's description says when to use it instead of these
    "remember": {"remember_note"},
    "save_memory": {"remember"},
    "remember_note": {"remember"},
    "retrieve_memory": {"get_context"},
    "retire_memory": {"restore_memory"},
    "get_context": {"retrieve_memory"},
}


def typed(schema: dict[str, Any]) -> bool:
    if "type" in schema:
        return True
    options = schema.get("anyOf", [])
    return bool(options) and all(typed(option) for option in options)


def check_tools(tools: list[Any]) -> dict[str, Any]:
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == READ_TOOLS | WRITE_TOOLS
    for name, tool in by_name.items():
        description = tool.description or ""
        assert "\nExample: " in description and f"{name}(" in description, name
        for neighbour in NEIGHBOURS.get(name, ()):
            assert neighbour in description, (name, neighbour)
        for param, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), (name, param)
            assert typed(schema), (name, param)
        assert tool.output_schema is not None and tool.output_schema.get("type") == "object", name
        hints = tool.annotations
        assert hints is not None and hints.read_only_hint is (name in READ_TOOLS), name
        assert hints.open_world_hint is False, name
        if name in WRITE_TOOLS:
            assert hints.destructive_hint is False, name  # nothing an agent can call deletes
            assert hints.idempotent_hint is (name != "remember_note"), name  # a log line appends
    assert "plus unscoped ones" in (by_name["get_context"].description or "")  # how a scope reads
    limits = by_name["remember"].input_schema["properties"]["statement"]
    assert limits["maxLength"] == 4000 and limits["minLength"] == 1
    tokens = by_name["get_context"].input_schema["properties"]["max_tokens"]
    assert (tokens["minimum"], tokens["maximum"]) == (100, 4000)
    return by_name


@pytest.mark.req("engine:surface")
def test_an_agent_reads_the_manual_and_a_session_does_what_it_promises(tmp_path: Path) -> None:
    async def go() -> tuple[str | None, list[Any], list[tuple[str, Any]]]:
        calls: list[tuple[str, Any]] = []
        async with stdio_client(tmp_path / "ws") as client:
            tools = (await client.list_tools()).tools

            async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
                result = await client.call_tool(name, args)
                assert not result.is_error, result.content
                calls.append((name, result.structured_content))
                return result.structured_content or {}

            fjord = {"query": "set up the Fjord database", "scope": "project:fjord"}
            await call("get_context", fjord)
            decided = {"subject": "Fjord", "predicate": "database", "scope": "project:fjord"}
            await call("remember", {"statement": "Fjord will use MySQL", **decided, "object": "MySQL"})
            await call(
                "remember", {"statement": "Fjord moved to Postgres 16", **decided, "object": "Postgres 16"}
            )
            wrong = await call(
                "remember",
                {"statement": "The Fjord database runs on a Raspberry Pi", "scope": "project:fjord"},
            )
            await call("retire_memory", {"id": wrong["id"], "reason": "it runs on fly.io"})
            await call("retire_memory", {"id": wrong["id"]})
            await call("remember_note", {"text": "Fjord database decision taken"})
            await call("get_context", fjord)
            await call(
                "retrieve_memory", {"subject": "fjord", "predicate": "database", "include_history": True}
            )
            await call("memory_status", {})
            return client.instructions, tools, calls

    instructions, tools, calls = anyio.run(go)
    assert instructions is not None
    for step in ("get_context", "remember", "retire_memory", "supersede"):
        assert step in instructions, step
    by_name = check_tools(tools)
    for name, structured in calls:  # every result validates against the schema the agent was shown
        jsonschema.Draft202012Validator(by_name[name].output_schema).validate(structured)

    results = [structured for _, structured in calls]
    first, mysql, postgres, wrong, retired, again, note, later, history, status = results
    assert first["facts"] == [] and first["notes"] == []
    assert (mysql["action"], postgres["action"]) == ("store", "supersede")
    assert postgres["closed"]["object"] == "MySQL" and postgres["id"] == mysql["id"]
    assert (retired["action"], again["action"]) == ("retire", "nochange")  # retiring twice changes nothing
    assert note["kind"] == "log"
    assert [f["object"] for f in later["facts"]] == ["Postgres 16"]  # the current value, not the old one
    assert wrong["id"] not in {n["id"] for n in later["notes"]}  # retired: out of recall
    assert later["tokens"] <= 800
    values = {(f["object"], f["current"]) for f in history["facts"]}
    assert values == {("MySQL", False), ("Postgres 16", True)}  # the old value is kept as history
    assert status["counts"]["fact"]["live"] == 1 and status["counts"]["note"]["retired"] == 1


def test_the_readme_table_shows_each_tool_with_its_real_parameters(memory: Memory) -> None:
    async def go() -> list[Any]:
        async with Client(build_server(memory)) as client:
            return (await client.list_tools()).tools

    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    shown = dict(re.findall(r"`(\w+)\(([^)]*)\)`", readme.split("## The tools", 1)[1].split("## ", 1)[0]))
    tools = anyio.run(go)
    assert set(shown) == {t.name for t in tools}
    for tool in tools:
        required = set(tool.input_schema.get("required", []))
        expected = [p if p in required else f"{p}?" for p in tool.input_schema.get("properties", {})]
        assert [a.strip() for a in shown[tool.name].split(",") if a.strip()] == expected, tool.name
