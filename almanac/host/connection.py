"""One MCP connection to Almanac, opened on first use and reopened after a failure (thin I/O).

An :class:`Endpoint` is either the service (its ``/mcp`` URL and a bearer token) or a local engine
run over stdio. The MCP client lives in a task of its own inside the provider's task group, so it
is entered and left by the same task whichever turn first needed it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation

CLIENT = Implementation(name="almanac-host", version="1")


class AlmanacUnavailable(RuntimeError):
    """Almanac could not be reached, or did not answer in time."""


class AlmanacRefused(RuntimeError):
    """Almanac answered with a tool error (the message is its own, saying what to fix)."""


@dataclass(frozen=True)
class Endpoint:
    url: str | None = None
    token: str | None = None
    command: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.url is None) == (not self.command):
            raise ValueError("an Endpoint is either a URL (with a token) or a command, not both or neither")

    @classmethod
    def service(cls, url: str, token: str) -> Endpoint:
        """Almanac's MCP URL (``https://…/mcp``) with a personal access token or OAuth token."""
        return cls(url=url, token=token)

    @classmethod
    def local(cls, directory: str, *, python: str = sys.executable) -> Endpoint:
        """A local engine on ``directory``, run over stdio (needs the ``almanac`` package installed)."""
        return cls(command=(python, "-m", "engine", "--stdio", "--dir", os.path.expanduser(directory)))

    def __repr__(self) -> str:  # never print the token
        return f"Endpoint(url={self.url!r})" if self.url else f"Endpoint(command={self.command!r})"


def structured(result: CallToolResult) -> dict[str, Any]:
    """A tool's structured result; a tool error becomes :class:`AlmanacRefused`."""
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise AlmanacRefused(text or "Almanac refused the call")
    if result.structured_content is not None:
        return dict(result.structured_content)
    try:
        return dict(json.loads(text))
    except ValueError:
        raise AlmanacUnavailable("Almanac answered without a structured result") from None


class Link:
    """The provider's connection; :meth:`call` opens it when needed and drops it after a failure."""

    def __init__(self, endpoint: Endpoint, tasks: TaskGroup) -> None:
        self.endpoint = endpoint
        self.tasks = tasks
        self._client: Client | None = None
        self._stop: anyio.Event | None = None
        self._lock = anyio.Lock()
        self._http: httpx2.AsyncClient | None = None

    def _client_for(self) -> tuple[Client, httpx2.AsyncClient | None]:
        if self.endpoint.url is not None:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.endpoint.token}"}, timeout=30)
            transport = streamable_http_client(self.endpoint.url, http_client=http)
            return Client(transport, client_info=CLIENT), http
        command: Sequence[str] = self.endpoint.command
        params = StdioServerParameters(command=command[0], args=list(command[1:]))
        return Client(params, client_info=CLIENT), None

    async def _hold(self, *, task_status: TaskStatus[None]) -> None:
        client, http = self._client_for()
        started = False
        try:
            async with client:
                stop = anyio.Event()
                self._client, self._stop = client, stop
                started = True
                task_status.started()
                await stop.wait()
        except Exception:
            if not started:
                raise
            # the connection broke while idle; the next call reconnects
        finally:
            self._client = self._stop = None
            if http is not None:
                await http.aclose()

    async def _open(self) -> Client:
        async with self._lock:
            if self._client is None:
                try:
                    await self.tasks.start(self._hold)
                except Exception as exc:
                    raise AlmanacUnavailable(f"cannot connect to Almanac ({_reason(exc)})") from exc
            assert self._client is not None
            return self._client

    def drop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool``; the caller bounds the time (``anyio.fail_after``)."""
        client = await self._open()
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as exc:
            self.drop()
            raise AlmanacUnavailable(f"Almanac did not answer {tool} ({_reason(exc)})") from exc
        return structured(result)


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
