"""Log notifications (``logging/setLevel``) and progress on long calls.

A 2025-era connection chooses its level with ``logging/setLevel`` (until it does, only warnings and
worse are sent); a 2026-07-28 request opts in through its own ``_meta`` and the SDK filters for it.
A call made with a ``progressToken`` gets a progress notification when it starts, one every
``interval`` seconds while it runs, and a last one when it is done, so a client can tell a slow
call from a dead one.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, get_args

import anyio
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import EmptyResult, LoggingLevel, SetLevelRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from engine.surface.handoff import ToolThreads

T = TypeVar("T")

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # severity ascending (RFC 5424)
DEFAULT_LEVEL: LoggingLevel = "warning"
LOGGER = "almanac"
_MAX_CONNECTIONS = 10_000  # as many as the SDK keeps sessions


def connection_key(headers: Mapping[str, str] | None) -> str:
    """One 2025-era connection: its ``Mcp-Session-Id`` over HTTP; the only one on stdio."""
    return (headers or {}).get("mcp-session-id") or "-"


class LogLevels:
    """The level each connection asked for (bounded: the oldest connections are forgotten)."""

    def __init__(self) -> None:
        self._levels: OrderedDict[str, LoggingLevel] = OrderedDict()

    def set(self, key: str, level: LoggingLevel) -> None:
        self._levels[key] = level
        self._levels.move_to_end(key)
        while len(self._levels) > _MAX_CONNECTIONS:
            self._levels.popitem(last=False)

    def wants(self, key: str, level: LoggingLevel) -> bool:
        floor = self._levels.get(key, DEFAULT_LEVEL)
        return LEVELS.index(level) >= LEVELS.index(floor)

    async def on_set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        """The ``logging/setLevel`` handler."""
        self.set(connection_key(getattr(ctx.request, "headers", None)), params.level)
        return EmptyResult()


#: The request a tool call serves. A tool reads ``ctx.request_context`` once and passes this on:
#: each read of it goes through pydantic's ``__getattr__`` (about 6 % of the event loop's time per
#: call when every helper read it again).
Request = ServerRequestContext[Any, Any]


async def log(levels: LogLevels, request: Request, level: LoggingLevel, message: str) -> None:
    """Send one log notification to the caller, if its connection (or request) asked for that level."""
    if level not in allowed_log_levels(request.protocol_version, request.meta):
        return  # a 2026-07-28 request that did not ask for this level: the SDK would drop it anyway
    modern = request.protocol_version in MODERN_PROTOCOL_VERSIONS
    headers = getattr(request.request, "headers", None)
    if not modern and not levels.wants(connection_key(headers), level):
        return
    with warnings.catch_warnings():
        # Logging is deprecated by the 2026-07-28 revision but is what 2025-era clients use.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        sending = request.session.send_log_message(
            level, message, LOGGER, related_request_id=request.request_id
        )
    await sending


def wants_progress(request: Request) -> bool:
    meta: Any = request.meta or {}
    return bool(meta.get("progress_token") or meta.get("progressToken"))


#: The threads tool work runs on (as many as anyio's default thread limit). A call hands its work
#: over and is handed the result back: one wake-up each way (``engine.surface.handoff``).
TOOL_THREADS = ToolThreads(40, "almanac-tool")

_HERE = threading.local()


@contextlib.contextmanager
def on_this_thread() -> Iterator[None]:
    """Within it, on this thread, :func:`off_loop` runs its work at once (without awaiting
    anything): a whole tool call driven on a tool thread (``engine.surface.direct``)."""
    _HERE.on = True
    try:
        yield
    finally:
        _HERE.on = False


async def off_loop(work: Callable[[], T]) -> T:
    """``work()`` on a tool thread. Cancelling the caller does not stop it: a write runs to its end
    (a stopping engine waits for it, ``engine.server.finish_writes``). Inside
    :func:`on_this_thread`: ``work()`` here and now."""
    if getattr(_HERE, "on", False):
        return work()
    return await TOOL_THREADS.run(work)


async def with_progress(
    ctx: Context[Any, Any], request: Request, work: Callable[[], T], interval: float
) -> T:
    """Run ``work`` on a tool thread; with a progress token (in ``request``, ``ctx``'s request),
    report start, heartbeats and end."""
    if not wants_progress(request):
        return await off_loop(work)
    beats = 0
    await ctx.report_progress(0, None, "working")
    async with anyio.create_task_group() as group:

        async def heartbeat() -> None:
            nonlocal beats
            while True:
                await anyio.sleep(interval)
                beats += 1
                await ctx.report_progress(beats, None, f"still working ({beats * interval:g} s)")

        group.start_soon(heartbeat)
        try:
            result = await off_loop(work)
        finally:
            group.cancel_scope.cancel()
    await ctx.report_progress(beats + 1, beats + 1, "done")
    return result
