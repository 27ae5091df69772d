"""Almanac as a provider: the service (its MCP URL and a token) or a local folder with no server.

A local folder runs the engine over stdio on that folder; the host's ``decayHalfLifeDays`` is then
the engine's instance setting (the folder's own ``settings.json`` still wins, as a workspace layer
does). On the service the half-life is the workspace's own setting, which the notes report after a
state check. ``get_context`` takes ``include_archived`` and ``scope`` but no count, so ``topK`` is
applied here, to its reply, in its order.

The state check calls ``memory_status`` (a read that neither cites nor logs a search): an answer is
ready; a refusal (HTTP 401/403: the token is revoked or wrong; 429/503: the workspace cannot start
now) or a tool error is not set up; nothing listening, another answer, or none within the bound is
not available.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio

from almanac.host.block import items
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
from almanac.host.scope import LAYERS, Scope, in_view
from almanac.host.settings import HostSettings

#: HTTP answers that mean "Almanac is there, but this call may not go through yet".
NOT_SET_UP_STATUS = {
    401: "the token was refused (revoked, expired or wrong): create a new one",
    403: "the token may not use this workspace",
    429: "the workspace is refusing calls for now",
    503: "the workspace's engine cannot start now",
}


class AlmanacProvider(Provider):
    name = "almanac"
    label = "Almanac"

    def __init__(self, endpoint: Endpoint, *, local: bool = False) -> None:
        super().__init__(endpoint)
        self.local = local
        self._half_life: float | None = None
        self._settings_file: Path | None = None
        self._status: Mapping[str, Any] | None = None

    @classmethod
    def service(cls, url: str, token: str) -> AlmanacProvider:
        """Almanac's MCP URL (``https://…/mcp``) with a personal access token or OAuth token."""
        return cls(Endpoint.service(url, token))

    @classmethod
    def folder(
        cls, directory: str, *, python: str = sys.executable, args: Sequence[str] = ()
    ) -> AlmanacProvider:
        """A local folder, served by an engine this library runs over stdio (no server)."""
        return cls(Endpoint.local(directory, python=python, args=args), local=True)

    def apply(self, settings: HostSettings) -> None:
        self._half_life = settings.decay_half_life_days

    def _command_endpoint(self) -> Endpoint:
        if not self.local or self._half_life is None:
            return self.endpoint
        fd, name = tempfile.mkstemp(prefix="almanac-host-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"half_life_days": self._half_life}, handle)
        self._settings_file = Path(name)
        return Endpoint(command=(*self.endpoint.command, "--settings", name))

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await super().__aexit__(kind, exc, tb)
        finally:
            if self._settings_file is not None:
                self._settings_file.unlink(missing_ok=True)
                self._settings_file = None

    async def search(self, request: Search) -> Found:
        arguments: dict[str, Any] = {
            "query": request.query,
            "max_tokens": request.max_tokens,
            "include_archived": request.include_archived,
        }
        if request.scope is not None:
            arguments["scope"] = request.scope.label
        reply = await self.link.call("get_context", arguments)
        every = list(items(reply))
        found = [
            Item(id or text_id(text), text) for id, text, scope in every if in_view(scope, request.scope)
        ]
        dropped = reply.get("dropped")
        left_out = dropped.get("count", 0) if isinstance(dropped, Mapping) else 0
        return Found(
            items=tuple(found[: request.top_k]),
            relevant=reply.get("relevant") is True,
            considered=len(every) + (left_out if isinstance(left_out, int) else 0),
            mode=str(reply.get("retrieval", "")),
        )

    async def save(
        self, statement: str, *, deadline: float, importance: float | None = None, scope: Scope | None = None
    ) -> None:
        arguments: dict[str, Any] = {"statement": statement}
        if importance is not None:
            arguments["importance"] = importance
        if scope is not None:
            arguments["scope"] = scope.label
        await self.link.call_until("remember", arguments, deadline)

    async def state(self, timeout: float = OP_LIMIT_S) -> ProviderState:
        link = self.link
        responses = link.responses
        bound = min(timeout, OP_LIMIT_S)
        try:
            with anyio.fail_after(bound):
                self._status = await link.call("memory_status", {})
        except TimeoutError:
            link.drop()
            return ProviderState(State.NOT_AVAILABLE, f"Almanac did not answer within {bound:g} s")
        except AlmanacRefused as exc:
            return ProviderState(State.NOT_SET_UP, f"Almanac answered but refused: {exc}")
        except AlmanacUnavailable as exc:
            status = link.last_status if link.responses > responses else None
            if status in NOT_SET_UP_STATUS:
                return ProviderState(State.NOT_SET_UP, f"HTTP {status}: {NOT_SET_UP_STATUS[status]} ({exc})")
            return ProviderState(State.NOT_AVAILABLE, str(exc))
        return ProviderState(State.READY, "memory_status answered")

    def notes(self) -> Notes:
        limits = [
            "topK is applied by this library to get_context's reply (the tool takes no count).",
            "A scoped load sees its layer's memories plus unscoped ones; the automatic load no layer's.",
        ]
        if self.local:
            limits.append("Local folder: decayHalfLifeDays is passed to the engine it runs.")
        else:
            limits.append("Service: the decay half-life is the workspace's own setting, not the host's.")
        search = "keyword, semantic or hybrid, as the workspace is set up"
        status = self._status
        if status is not None:
            settings = status.get("settings", {})
            origin = status.get("settings_origin", {})
            if isinstance(settings, Mapping) and "half_life_days" in settings:
                where = origin.get("half_life_days", "") if isinstance(origin, Mapping) else ""
                limits.append(
                    f"Decay half-life: {settings['half_life_days']:g} days ({where or 'workspace'})."
                )
            embedding = status.get("embedding", {})
            if isinstance(embedding, Mapping) and embedding.get("provider") == "off":
                search = "keyword (semantic search is off in this workspace)"
        return Notes(
            provider=self.name,
            search=search,
            scoping=("user", *LAYERS),
            reads="records",
            decay=True,
            archive=True,
            retrieval_log=True,
            limits=tuple(limits),
        )
