"""Any MCP memory server with a search tool and a save tool, as a provider.

The tool and argument names are configurable; :data:`HEADROOM` is Headroom's memory server
(``memory_search``/``memory_save``), the default example. Such a surface has limits the provider
reports itself (:meth:`McpMemoryProvider.notes`): scoping collapses to the user layer (a scoped save
is saved unscoped), reads come back as text (``1. [relevance=0.50] <content>`` lines: no ids, tags
or times, so each memory's id here is a hash of its text), and there is no decay, archive or
``includeArchived``. ``topK`` is sent as the search's limit argument (when the tools name one) and
applied to what comes back.

The state check lists the server's tools, then calls the search tool once: both tools present and
the call answering is ready; the call failing (a tool error, as a server that starts but lacks its
model answers) is not set up; a server that cannot be started or reached, lacks the tools, or does
not answer within the bound is not available.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.types import CallToolResult

from almanac.host.connection import AlmanacRefused, AlmanacUnavailable, Endpoint
from almanac.host.providers.base import (
    OP_LIMIT_S,
    Found,
    Item,
    Notes,
    Provider,
    ProviderState,
    Search,
    State,
    text_id,
)
from almanac.host.scope import Scope

_RESULT = re.compile(r"^\s*\d+\.\s*(?:\[relevance=[0-9.]+\]\s*)?(.*)$")
#: The query of a state check: any answer, even "nothing found", shows the search works.
PROBE_QUERY = "memory provider check"


@dataclass(frozen=True)
class McpTools:
    """How a server's memory tools are called."""

    search: str = "memory_search"
    save: str = "memory_save"
    query_arg: str = "query"
    limit_arg: str | None = "top_k"
    content_arg: str = "content"
    name: str = "mcp"
    """The provider's name in the retrieval log."""


HEADROOM = McpTools(name="headroom-mcp")


def text_of(result: CallToolResult) -> str:
    """A tool's text; a tool error becomes :class:`AlmanacRefused` with the server's words."""
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise AlmanacRefused(text.strip() or "the memory server refused the call")
    return text


def parse_results(text: str) -> list[str]:
    """The memories of a text search result, one per numbered line (a line that does not start a
    new result continues the one before); an answer with no numbered line holds none."""
    found: list[str] = []
    for line in text.splitlines():
        match = _RESULT.match(line)
        if match:
            found.append(match.group(1).strip())
        elif found and line.strip():
            found[-1] = f"{found[-1]}\n{line.strip()}"
    return [f for f in found if f]


class McpMemoryProvider(Provider):
    label = "the memory server"

    def __init__(self, endpoint: Endpoint, tools: McpTools = HEADROOM) -> None:
        super().__init__(endpoint)
        self.tools = tools
        self.name = tools.name
        self._description: str | None = None

    async def search(self, request: Search) -> Found:
        arguments: dict[str, Any] = {self.tools.query_arg: request.query}
        if self.tools.limit_arg is not None:
            arguments[self.tools.limit_arg] = request.top_k
        text = await self.link.call_as(self.tools.search, arguments, text_of)
        memories = parse_results(text)
        items = tuple(Item(text_id(m), m) for m in memories[: request.top_k])
        return Found(items=items, relevant=bool(items), considered=len(memories), mode="text")

    async def save(
        self, statement: str, *, deadline: float, importance: float | None = None, scope: Scope | None = None
    ) -> None:
        # importance and scope have no place on this surface: saved into the user layer
        await self.link.call_until(self.tools.save, {self.tools.content_arg: statement}, deadline, text_of)

    async def state(self, timeout: float = OP_LIMIT_S) -> ProviderState:
        link = self.link
        bound = min(timeout, OP_LIMIT_S)
        try:
            with anyio.fail_after(bound):
                offered = {tool.name: tool for tool in await link.tools()}
                missing = [t for t in (self.tools.search, self.tools.save) if t not in offered]
                if missing:
                    return ProviderState(
                        State.NOT_AVAILABLE,
                        f"the server offers no {' or '.join(missing)} tool (it offers: "
                        f"{', '.join(sorted(offered)) or 'none'}); is this the right server?",
                    )
                self._description = offered[self.tools.search].description
                probe = Search(PROBE_QUERY, top_k=1)
                await self.search(probe)
        except TimeoutError:
            link.drop()
            return ProviderState(State.NOT_AVAILABLE, f"the memory server did not answer within {bound:g} s")
        except AlmanacRefused as exc:
            return ProviderState(
                State.NOT_SET_UP,
                f"the server starts and offers its tools, but {self.tools.search} fails: {exc} "
                "(finish its setup step; do not reinstall)",
            )
        except AlmanacUnavailable as exc:
            return ProviderState(State.NOT_AVAILABLE, str(exc))
        return ProviderState(State.READY, f"{self.tools.search} answered")

    def notes(self) -> Notes:
        limits = [
            "Scoping collapses to a single user layer: a session, agent or turn save is saved unscoped.",
            "Reads come back as text: only content and a relevance number, no tags, times or importance.",
            "No decay or archive: decayHalfLifeDays and includeArchived have no effect.",
        ]
        if self._description:
            limits.append(f"The server says of {self.tools.search}: {self._description.strip()}")
        return Notes(
            provider=self.name,
            search="as the server does it (Headroom: semantic, by embeddings)",
            scoping=("user",),
            reads="text",
            decay=False,
            archive=False,
            retrieval_log=False,
            limits=tuple(limits),
        )
