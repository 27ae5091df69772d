"""The gateway's calls to an engine's owner-only ``/admin`` routes (never reachable from ``/mcp``).

One generic call, :func:`admin_call`, plus one small function per admin concept. A refusal comes back
as a :class:`~gateway.engines.calls.ToolRefusal` carrying the engine's stable code and message, like
a tool's; anything else unexpected is :class:`~gateway.errors.EngineUnreachable`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from gateway.engines.calls import ToolRefusal
from gateway.errors import EngineUnreachable

REFUSALS = (400, 403, 404, 409)
STREAM_TYPE = "application/x-ndjson"


async def admin_call(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    params: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any] | ToolRefusal:
    """``method path`` on the engine behind ``client``: its JSON reply or its refusal."""
    try:
        response = await client.request(method, path, params=params, json=body, headers={"host": "localhost"})
    except httpx.TransportError as exc:
        raise EngineUnreachable("the workspace's engine did not answer; try again", retry_after=1) from exc
    return _reply(response)


def _reply(response: httpx.Response) -> dict[str, Any] | ToolRefusal:
    if response.status_code in REFUSALS:
        try:
            error = response.json()["error"]
            fields = {str(k): str(v) for k, v in dict(error.get("fields") or {}).items()}
            return ToolRefusal(str(error["code"]), str(error["message"]), fields)
        except (ValueError, KeyError, TypeError):
            pass
    if response.status_code != 200:
        raise EngineUnreachable(f"the engine answered {response.status_code}; try again", retry_after=1)
    reply: dict[str, Any] = response.json()
    return reply


async def list_memories(client: httpx.AsyncClient, params: dict[str, str]) -> dict[str, Any] | ToolRefusal:
    """One page of the owner's listing (``GET /admin/memories``)."""
    return await admin_call(client, "GET", "/admin/memories", params=params)


async def import_zip(
    client: httpx.AsyncClient, content: AsyncIterator[bytes], label: str | None
) -> dict[str, Any] | ToolRefusal:
    """Send a zip (``POST /admin/import``): an Almanac export is restored into an empty workspace,
    Markdown goes under ``notes/Imported/<label>/``; the reply lists what was imported and skipped."""
    params = {"label": label} if label else None
    try:
        response = await client.post(
            "/admin/import",
            params=params,
            content=content,
            headers={"host": "localhost", "content-type": "application/zip"},
        )
    except httpx.TransportError as exc:
        raise EngineUnreachable("the workspace's engine did not answer; try again", retry_after=1) from exc
    return _reply(response)


async def import_events(
    client: httpx.AsyncClient, content: AsyncIterator[bytes], label: str | None
) -> AsyncIterator[dict[str, Any] | ToolRefusal]:
    """Send a zip like :func:`import_zip`, asking for progress as it goes: yields
    ``{"progress": line}`` events, then the reply (``{"result": {...}}``) or a :class:`ToolRefusal`
    (a refusal before any progress means nothing was written). Closing this early leaves the
    engine to finish the import on its own."""
    params = {"label": label} if label else None
    headers = {"host": "localhost", "content-type": "application/zip", "accept": STREAM_TYPE}
    request = client.build_request("POST", "/admin/import", params=params, content=content, headers=headers)
    try:
        response = await client.send(request, stream=True)
    except httpx.TransportError as exc:
        raise EngineUnreachable("the workspace's engine did not answer; try again", retry_after=1) from exc
    try:
        streams = response.headers.get("content-type", "").startswith(STREAM_TYPE)
        if response.status_code != 200 or not streams:
            await response.aread()
            yield _reply(response)
            return
        async for line in response.aiter_lines():
            if not line.strip():
                continue
            event = json.loads(line)
            if "error" in event:
                yield ToolRefusal(str(event["error"]["code"]), str(event["error"]["message"]), {})
                return
            yield event
            if "result" in event:
                return
    except httpx.TransportError as exc:
        raise EngineUnreachable("the workspace's engine stopped answering mid-import", retry_after=1) from exc
    finally:
        await response.aclose()
    raise EngineUnreachable("the workspace's engine ended the import without a reply", retry_after=1)


async def open_export(client: httpx.AsyncClient) -> httpx.Response:
    """The engine's export zip (``GET /admin/export``) as a response still streaming; close it."""
    request = client.build_request("GET", "/admin/export", headers={"host": "localhost"})
    try:
        response = await client.send(request, stream=True)
    except httpx.TransportError as exc:
        raise EngineUnreachable("the workspace's engine did not answer; try again", retry_after=1) from exc
    if response.status_code != 200:
        await response.aclose()
        raise EngineUnreachable(f"the engine answered {response.status_code}; try again", retry_after=1)
    return response


async def memory_item(
    client: httpx.AsyncClient, memory_id: str, pin: dict[str, str] | None = None
) -> dict[str, Any] | ToolRefusal:
    """One memory's listing row, a deleted one's tombstone included (``GET /admin/memories/{id}``);
    ``pin``: ``{"pinned": scope, "unscoped": "1" | "0"}`` for a pinned connection asking."""
    return await admin_call(client, "GET", f"/admin/memories/{quote(memory_id, safe='')}", params=pin or None)


async def delete_memory(
    client: httpx.AsyncClient, memory_id: str, source: str, pinned: str | None = None
) -> dict[str, Any] | ToolRefusal:
    """Delete a retired memory for good (``POST /admin/memories/{id}/delete``); ``source`` is who."""
    body = {"source": source, "pinned": pinned}
    return await admin_call(client, "POST", f"/admin/memories/{quote(memory_id, safe='')}/delete", body=body)


async def settings(client: httpx.AsyncClient) -> dict[str, Any] | ToolRefusal:
    """Every setting with its value, origin, inherited value and the provider's state."""
    return await admin_call(client, "GET", "/admin/settings")


async def save_settings(
    client: httpx.AsyncClient, changes: dict[str, Any], clear: list[str]
) -> dict[str, Any] | ToolRefusal:
    """Change the workspace layer; a refusal carries what to fix by field and nothing is saved."""
    return await admin_call(client, "POST", "/admin/settings", body={"set": changes, "clear": clear})


async def activity(client: httpx.AsyncClient, params: dict[str, str]) -> dict[str, Any] | ToolRefusal:
    """One page of the retrieval log, newest first (``GET /admin/activity``)."""
    return await admin_call(client, "GET", "/admin/activity", params=params)
