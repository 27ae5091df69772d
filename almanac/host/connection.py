"""One MCP connection to Almanac, opened on first use and reopened after a failure (thin I/O).

An :class:`Endpoint` is either the service (its ``/mcp`` URL and a bearer token) or a local engine
run over stdio. The MCP client lives in a task of its own inside the provider's task group, so it
is entered and left by the same task whichever turn first needed it. A connection that failed or
timed out is forgotten at once and closes on its own: the next call opens a new one and is never
sent into one that is closing. Saves go through :meth:`Link.call_until`, which tries again
(``almanac.host.retry``) until the save's deadline, waiting out a ``Retry-After``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation, Tool

from almanac.host.retry import next_wait, parse_retry_after

CLIENT = Implementation(name="almanac-host", version="1")
#: How long a dropped connection may take to close (end its session) before it is cut off.
CLOSE_GRACE_S = 5.0
#: Any single operation that takes longer than this counts as unavailable (a save's next attempt
#: goes on a new connection).
OP_LIMIT_S = 20.0

T = TypeVar("T")


class AlmanacUnavailable(RuntimeError):
    """The provider (Almanac, or another MCP memory server) could not be reached, or did not answer
    in time."""


class AlmanacRefused(RuntimeError):
    """The provider answered with a tool error (the message is its own, saying what to fix)."""


class AlmanacBusy(AlmanacUnavailable):
    """Almanac refused for now and said when to call again (HTTP 503 or 429 with ``Retry-After``)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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
    def local(cls, directory: str, *, python: str = sys.executable, args: Sequence[str] = ()) -> Endpoint:
        """A local engine on ``directory``, run over stdio (needs the ``almanac`` package installed);
        ``args`` are further engine options (``--embedding-provider off``, say)."""
        directory = os.path.expanduser(directory)
        return cls(command=(python, "-m", "engine", "--stdio", "--dir", directory, *args))

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


@dataclass(eq=False)
class _Session:
    """One open MCP connection, held by its own task until :attr:`stop` is set."""

    client: Client
    stop: anyio.Event
    scope: anyio.CancelScope


class Link:
    """The provider's connection. :meth:`call` opens one when there is none; a call that fails on
    the transport drops it at once (the next call opens a new one), so no call is ever sent into a
    connection that is closing. :meth:`call_until` tries again until a deadline."""

    def __init__(self, endpoint: Endpoint, tasks: TaskGroup, *, label: str = "Almanac") -> None:
        self.endpoint = endpoint
        self.tasks = tasks
        self.label = label
        #: the HTTP status of the last response seen, and how many responses came in
        self.last_status: int | None = None
        self.responses = 0
        self._session: _Session | None = None
        self._lock = anyio.Lock()
        #: the last ``Retry-After`` a refusal carried, and how many refusals had come before it
        self._retry_after: float | None = None
        self._refused_with = 0
        self._refusals = 0

    async def _saw(self, response: httpx2.Response) -> None:
        self.last_status = response.status_code
        self.responses += 1
        if response.status_code in (429, 503):
            self._retry_after = parse_retry_after(response.headers.get("retry-after"))
            self._refused_with = response.status_code
            self._refusals += 1

    def _client_for(self) -> tuple[Client, httpx2.AsyncClient | None]:
        if self.endpoint.url is not None:
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {self.endpoint.token}"},
                timeout=30,
                event_hooks={"response": [self._saw]},
            )
            transport = streamable_http_client(self.endpoint.url, http_client=http)
            return Client(transport, client_info=CLIENT), http
        command: Sequence[str] = self.endpoint.command
        params = StdioServerParameters(command=command[0], args=list(command[1:]))
        return Client(params, client_info=CLIENT), None

    async def _hold(self, *, task_status: TaskStatus[_Session]) -> None:
        client, http = self._client_for()
        session: _Session | None = None
        try:
            with anyio.CancelScope() as scope:
                async with client:
                    session = _Session(client, anyio.Event(), scope)
                    self._session = session
                    task_status.started(session)
                    await session.stop.wait()
        except Exception:
            if session is None:
                raise
            # the connection broke while idle; the next call opens another
        finally:
            if session is not None and self._session is session:
                self._session = None
            if http is not None:
                with anyio.CancelScope(shield=True):
                    await http.aclose()

    async def _open(self) -> tuple[_Session, bool]:
        """The open connection, or a new one; and whether it is new."""
        async with self._lock:
            if self._session is not None:
                return self._session, False
            refusals = self._refusals
            try:
                session: _Session = await self.tasks.start(self._hold)
            except Exception as exc:
                raise self._failure(f"cannot connect to {self.label} ({_reason(exc)})", refusals) from exc
            return session, True

    def drop(self, session: _Session | None = None) -> None:
        """Stop using the connection (``session``, if it is still the current one): the next call
        opens a new one while this one closes, given :data:`CLOSE_GRACE_S` to say goodbye."""
        current = self._session
        if current is None or (session is not None and session is not current):
            return
        self._session = None
        current.stop.set()
        current.scope.deadline = min(current.scope.deadline, anyio.current_time() + CLOSE_GRACE_S)

    async def tools(self) -> list[Tool]:
        """The tools the server advertises (the caller bounds the time)."""
        session, _ = await self._open()
        try:
            return list((await session.client.list_tools()).tools)
        except Exception as exc:
            self.drop(session)
            raise AlmanacUnavailable(f"{self.label} did not list its tools ({_reason(exc)})") from exc

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool`` once and read its structured result (:meth:`call_as`)."""
        return await self.call_as(tool, arguments, structured)

    async def call_as(self, tool: str, arguments: dict[str, Any], read: Callable[[CallToolResult], T]) -> T:
        """Call ``tool`` once and ``read`` its result. When a connection that was already open
        fails, it is replaced and the call sent once more (it may have gone stale: the server
        restarted); a refusal with ``Retry-After`` is not, it raises :class:`AlmanacBusy`. The
        caller bounds the time (``anyio.fail_after``)."""
        resent = False
        while True:
            session, new = await self._open()
            refusals = self._refusals
            try:
                result = await session.client.call_tool(tool, arguments)
            except Exception as exc:
                self.drop(session)
                if not (new or resent) and self._refusals == refusals:
                    resent = True
                    continue
                raise self._failure(f"{self.label} did not answer {tool} ({_reason(exc)})", refusals) from exc
            return read(result)

    async def call_until(
        self,
        tool: str,
        arguments: dict[str, Any],
        deadline: float,
        read: Callable[[CallToolResult], Any] = structured,
    ) -> Any:
        """Call ``tool``, trying again after a transport failure (after the wait a refusal's
        ``Retry-After`` asks for, if that ends before ``deadline``, an ``anyio.current_time()``)
        until ``deadline``; one attempt may take at most :data:`OP_LIMIT_S`. A tool error
        (:class:`AlmanacRefused`) is not tried again. When the time is up, raises
        :class:`AlmanacUnavailable` saying why and what the last failure was."""
        failures, last = 0, "no attempt finished"
        while True:
            remaining = max(0.0, deadline - anyio.current_time())
            try:
                with anyio.fail_after(min(remaining, OP_LIMIT_S)):
                    return await self.call_as(tool, arguments, read)
            except TimeoutError:
                if remaining > OP_LIMIT_S:  # this attempt hung: try again on a new connection
                    self.drop()
                    failures, last = failures + 1, f"{tool} took over {OP_LIMIT_S:g} s"
                    continue
                raise AlmanacUnavailable(f"{tool} did not land in time (last failure: {last})") from None
            except AlmanacUnavailable as exc:
                failures, last = failures + 1, str(exc)
                retry_after = exc.retry_after if isinstance(exc, AlmanacBusy) else None
                wait = next_wait(failures, retry_after, deadline - anyio.current_time())
                if wait.seconds is None:
                    raise AlmanacUnavailable(f"{exc}; {wait.why}") from exc
                await anyio.sleep(wait.seconds)

    def _failure(self, message: str, refusals: int) -> AlmanacUnavailable:
        """The failure to raise; :class:`AlmanacBusy` when a refusal with ``Retry-After`` came
        in since ``refusals`` were counted."""
        if self._refusals != refusals and self._retry_after is not None:
            said = f"{self.label} answered {self._refused_with} with Retry-After: {self._retry_after:g} s"
            return AlmanacBusy(f"{message}; {said}", self._retry_after)
        return AlmanacUnavailable(message)


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
