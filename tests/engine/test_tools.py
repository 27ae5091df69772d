"""The MCP surface, driven by the real mcp client in process (both protocol eras)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from engine.embed.remote import RemoteEmbedder
from engine.memory import Memory
from engine.recall.status import memory_status as status_of
from engine.results import StatusReply
from engine.store.workspace import Workspace
from engine.tools import Served, build_server, client_status, without_paths
from tests.engine.index.helpers import CALLER, engine

WRITE_TOOLS = {"remember", "save_memory", "remember_note", "retire_memory", "restore_memory"}
MODES = ["legacy", "2026-07-28"]


@pytest.fixture
def server(memory: Memory) -> Iterator[Any]:
    yield build_server(memory)


def call(server: Any, mode: str, name: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(server, mode=mode) as client:
            return await client.call_tool(name, args)

    return anyio.run(go)


@pytest.mark.req("engine:mcp")
def test_tools_have_short_descriptions_input_and_output_schemas(server: Any) -> None:
    async def go() -> Any:
        async with Client(server) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in anyio.run(go)}
    assert WRITE_TOOLS | {"retrieve_memory", "get_context"} <= set(tools)
    for tool in tools.values():
        assert tool.description and len(tool.description) <= 700, tool.name  # concise: every session pays
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None, tool.name
    remember = tools["remember"].input_schema
    assert remember["required"] == ["statement"]
    assert {"subject", "predicate", "object", "scope", "tags", "importance"} <= set(remember["properties"])


@pytest.mark.req("engine:mcp")
@pytest.mark.req("write:receipt")
@pytest.mark.parametrize("mode", MODES)
def test_results_are_structured(server: Any, mode: str) -> None:
    result = call(server, mode, "remember", {"statement": "Fjord uses Postgres", "subject": "Fjord",
                                             "predicate": "db", "object": "Postgres"})  # fmt: skip
    assert not result.is_error
    receipt = result.structured_content
    assert (
        receipt["action"] == "store" and receipt["kind"] == "fact" and receipt["event_id"].startswith("evt_")
    )
    found = call(server, mode, "retrieve_memory", {"subject": "fjord"}).structured_content
    assert found["facts"][0]["object"] == "Postgres" and found["facts"][0]["id"] == receipt["id"]


@pytest.mark.req("engine:mcp")
@pytest.mark.req("write:remember")
@pytest.mark.parametrize("mode", MODES)
def test_refusals_are_raised_tool_errors_that_say_what_to_fix(
    server: Any, mode: str, workspace: Workspace
) -> None:
    result = call(server, mode, "remember", {"statement": "y" * 4001})
    assert result.is_error and result.structured_content is None
    assert (
        "4,001 characters; the limit is 4,000" in result.content[0].text
        and "[too_long]" in result.content[0].text
    )
    missing = call(server, mode, "retire_memory", {"id": "nte_01M8N16DE4023GQ7VE9X9A8VJT"})
    assert missing.is_error and "[not_found]" in missing.content[0].text
    assert workspace.notes == {} and workspace.facts.records == {}


@pytest.mark.req("write:source")
def test_without_a_gateway_the_client_name_is_the_self_reported_source(server: Any) -> None:
    receipt = call(server, "legacy", "remember", {"statement": "hello"}).structured_content
    assert receipt["source_verified"] is False and receipt["source"]
    labelled = call(
        server, "legacy", "remember", {"statement": "hi", "source": "nightly job"}
    ).structured_content
    assert (labelled["source"], labelled["source_verified"]) == ("nightly job", False)


def test_server_paths_are_taken_out_of_messages() -> None:
    assert without_paths("not running on /run/almanac/embed.sock (refused)") == (
        "not running on <server path> (refused)"
    )
    assert without_paths("see https://example.com/a/b and notes/2026/x.md") == (
        "see https://example.com/a/b and notes/2026/x.md"
    )


@pytest.mark.req("engine:surface")
@pytest.mark.req("recall:status")
def test_memory_status_reports_sizes_and_states_never_server_paths(tmp_path: Path) -> None:
    with engine(tmp_path / "ws") as e:
        e.memory.remember(CALLER, "Fjord uses Postgres")
        e.settle()
        server = build_server(e.memory, recall=e.recall)

        async def go() -> Any:
            async with Client(server) as client:
                return await client.call_tool("memory_status", {})

        result = anyio.run(go)
        local = status_of(e.recall, CALLER)
    assert not result.is_error
    status = result.structured_content
    StatusReply.model_validate(status)
    assert status["counts"]["note"]["live"] == 1 and status["storage_bytes"]["store"] > 0
    assert str(tmp_path) not in json.dumps(status) and str(tmp_path) not in result.content[0].text

    # The host embedder service is down: its state says so without naming its socket's path.
    sock = tmp_path / "run" / "embed.sock"
    down = RemoteEmbedder(sock).probe().to_json()
    assert str(sock) in down["detail"]  # what the engine's own log says
    shown = client_status({**local, "embedding": down})
    StatusReply.model_validate(shown)
    assert shown["embedding"]["state"] == "not_available"
    assert "<server path>" in shown["embedding"]["detail"]
    assert shown["embedding"]["notes"][0] == "Computed by the embedder service this host's engines share."
    assert str(tmp_path) not in json.dumps(shown)


@pytest.mark.req("perf:cold-start")
def test_a_server_built_before_its_workspace_serves_once_given_it(memory: Memory) -> None:
    """A warm spare builds its tools before it is assigned a workspace (``Served``): until then a
    call is refused with a code; once given, the same server serves it."""
    served = Served()
    early = build_server(served)
    refused = call(early, "2026-07-28", "remember", {"statement": "Fjord uses Postgres"})
    assert refused.is_error and "[not_built]" in refused.content[0].text
    served.memory = memory
    done = call(early, "2026-07-28", "remember", {"statement": "Fjord uses Postgres"})
    assert not done.is_error, done.content
    again = call(early, "2026-07-28", "retrieve_memory", {"id": done.structured_content["id"]})
    assert "Postgres" in again.content[0].text


@pytest.mark.req("engine:mcp")
@pytest.mark.parametrize("mode", MODES)
def test_only_what_is_served_is_advertised_and_the_rest_is_invalid_params(server: Any, mode: str) -> None:
    async def go() -> tuple[Any, list[tuple[int, str]]]:
        answers: list[tuple[int, str]] = []
        async with Client(server, mode=mode) as client:
            for ask in (
                client.list_prompts,
                client.list_resources,
                lambda: client.get_prompt("summarise"),
                lambda: client.read_resource("file:///etc/passwd"),
            ):
                with pytest.raises(MCPError) as refused:
                    await ask()
                answers.append((refused.value.code, refused.value.error.message))
            return client.server_capabilities, answers

    capabilities, answers = anyio.run(go)
    assert capabilities.prompts is None and capabilities.resources is None
    if mode == "legacy":  # the handshake's (2026-07-28's server/discover: test_lean_contract.py)
        assert capabilities.tools is not None and capabilities.logging is not None
    assert answers == [
        (-32601, "Method not found"),
        (-32601, "Method not found"),
        (-32602, "no prompt named 'summarise': Almanac serves no prompts, only tools"),
        (-32602, "no resource at 'file:///etc/passwd': Almanac serves no resources, only tools"),
    ]
