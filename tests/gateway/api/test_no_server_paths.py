"""No error carries a server path (tool:*, gw:rest): a real gateway whose data dir sits under a
sentinel directory name, every tool over MCP and every REST route driven into refusals — bad and
missing arguments, unknown ids and tools, a read-only token, a restore the disk refuses, uploads
that are not what they claim — and not one reply names the sentinel."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from gateway.api.admin import ADMIN_OPERATIONS
from gateway.api.openapi import OPERATIONS
from tests.gateway.e2e import Gateway, connect, data, refusal, start_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.req("engine:surface", "gw:rest")]

SENTINEL = "SENTINEL-7f3a9c"
OWNER = "ada@example.com"
UNKNOWN_ID = "nte_01M8N16DE4023GQ7VE9X9A8VJT"
#: A value of the wrong type for any argument (every argument is a string, number, flag or list).
WRONG = {"nested": [{"deep": True}]}


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    gw = start_gateway(tmp_path / SENTINEL / "data", tmp_path / "gateway.log")
    try:
        gw.owner(OWNER)
        yield gw
    finally:
        gw.stop()


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


async def tool_errors(gateway: Gateway, token: str, read_only: str) -> list[str]:
    """The text of every refusal the tools give, over MCP."""
    seen: list[str] = []
    async with connect(gateway, token) as client:
        listed = (await client.list_tools()).tools
        for each in listed:
            properties = dict(each.input_schema.get("properties", {}))
            for arguments in ({}, {"bogus": 1}, dict.fromkeys(properties, WRONG)):
                result = await client.call_tool(each.name, arguments)
                if result.is_error:
                    seen.append(refusal(result))
        seen.append(refusal(await client.call_tool("forget_everything", {})))
        for name in ("retrieve_memory", "retire_memory", "restore_memory"):
            for memory in (UNKNOWN_ID, "../../../etc/passwd", "/etc/passwd"):
                result = await client.call_tool(name, {"id": memory})
                if result.is_error:
                    seen.append(refusal(result))
        seen.append(refusal(await client.call_tool("get_context", {"query": "x", "max_tokens": 1})))
        for ask in (lambda: client.get_prompt("summarise"), lambda: client.read_resource("file:///etc/x")):
            with pytest.raises(MCPError) as refused:
                await ask()
            seen.append(refused.value.error.message)
        # a restore the disk refuses: something already sits where the note is to go back to
        note = data(await client.call_tool("remember", {"statement": "The heron nests by the north pier."}))
        data(await client.call_tool("retire_memory", {"id": note["id"]}))
        ws = gateway.workspace_dir(OWNER)
        (retired,) = (ws / "retired").rglob(f"{note['id']}.md")
        (ws / retired.relative_to(ws / "retired")).mkdir(parents=True)
        blocked = refusal(await client.call_tool("restore_memory", {"id": note["id"]}))
        assert "could not move the note durably" in blocked and "store_unavailable" in blocked
        seen.append(blocked)
    async with connect(gateway, read_only) as client:
        for name in ("remember", "retire_memory", "restore_memory"):
            seen.append(refusal(await client.call_tool(name, {"statement": "x", "id": note["id"]})))
    return seen


def rest_errors(gateway: Gateway, token: str, read_only: str) -> list[str]:
    """The body of every refusal the REST API gives (status 400 and up)."""
    seen: list[str] = []

    def ask(method: str, path: str, who: str = token, **kw: Any) -> None:
        headers = {"Authorization": f"Bearer {who}", **kw.pop("headers", {})}
        response = httpx.request(method, gateway.url + "/api/v1" + path, headers=headers, timeout=120, **kw)
        if response.status_code >= 400:
            seen.append(response.text)

    operations = [(op.method, op.path) for op in OPERATIONS] + [
        (op.method, op.path) for op in ADMIN_OPERATIONS
    ]
    for method, template in operations:
        for memory in (UNKNOWN_ID, "..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd"):
            path = template.replace("{id}", memory)
            ask(method, path, params={"bogus": "1"})
            ask(method, path, params={"limit": "-1", "offset": "x", "since": "yesterday"})
            if method == "POST":
                ask(method, path, content=b"{not json")
                ask(method, path, json={"bogus": 1})
                ask(method, path, json=WRONG)
            ask(method, path, who=read_only, json={"statement": "x"})
    ask("PATCH", "/admin/settings", content=b"[]")
    ask("PATCH", "/admin/settings", json={"set": {"no_such_setting": 1, "embedding_provider": "/etc/x"}})
    ask("GET", "/admin/activity", params={"limit": "0"})
    upload: dict[str, Any] = {"headers": {"Content-Type": "application/zip"}}
    ask("POST", "/admin/import", content=b"not a zip", **upload)
    ask("POST", "/admin/import", content=zipped({"a.md": "# a"}), **upload)  # Markdown without a label
    ask("POST", "/admin/import", params={"label": "../x"}, content=zipped({"a.md": "# a"}), **upload)
    manifest = {
        "format": "almanac-export",
        "version": 1,
        "files": [{"path": "notes/x.md", "bytes": 1, "sha256": "0"}],
    }
    ask("POST", "/admin/import", content=zipped({"manifest.json": json.dumps(manifest)}), **upload)
    ask("POST", "/admin/import", who=read_only, content=b"x", **upload)
    return seen


async def test_no_error_of_the_tools_or_the_rest_api_names_a_server_path(gateway: Gateway) -> None:
    token = gateway.token(OWNER, "Agent")
    read_only = gateway.token(OWNER, "Reader", "--read-only")
    errors = await tool_errors(gateway, token, read_only) + rest_errors(gateway, token, read_only)
    assert len(errors) >= 100  # the refusals above were produced, not skipped
    leaking = [error for error in errors if SENTINEL in error or str(gateway.data_dir) in error]
    assert leaking == []
