"""What every memory provider is to the turn loop: search, save, its state and its own notes.

A provider reports one of three states (:class:`State`), found by actually calling it once within
a bounded time — never by a successful handshake alone, since a server can start, advertise its
tools and still fail every call:

- **ready**: the provider works;
- **not set up**: it is there and answers, but its calls fail for want of a setup step (a token,
  a workspace that can start, a model download) — finish that step, do not reinstall;
- **not available**: nothing answers (not installed, nothing listening, or no answer within
  :data:`OP_LIMIT_S`) — install it or pick the other provider.

Its :class:`Notes` — what it can and cannot do — come from the provider itself, so they cannot
drift from a list kept beside it.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from almanac.host.connection import OP_LIMIT_S, Endpoint, Link
from almanac.host.scope import Scope
from almanac.host.settings import HostSettings

__all__ = ["OP_LIMIT_S", "Found", "Item", "Notes", "Provider", "ProviderState", "Search", "State"]


class State(Enum):
    READY = "ready"
    NOT_SET_UP = "not set up"
    NOT_AVAILABLE = "not available"


@dataclass(frozen=True)
class ProviderState:
    state: State
    detail: str = ""
    """What the call found, in the provider's words, and what to do."""

    def __str__(self) -> str:
        return f"{self.state.value}: {self.detail}" if self.detail else self.state.value


@dataclass(frozen=True)
class Notes:
    """What a provider can and cannot do, as it reports it."""

    provider: str
    search: str
    scoping: tuple[str, ...]
    """The layers it keeps apart: ``user`` always; ``session``, ``agent``, ``turn`` when it can."""
    reads: str
    """``records`` (ids, tags, times) or ``text`` (content and a relevance number only)."""
    decay: bool
    archive: bool
    retrieval_log: bool
    """Whether the provider keeps its own log of searches (the library's log is written for all)."""
    limits: tuple[str, ...] = ()
    """Plain sentences: each limit or detail the provider reports."""

    def lines(self) -> list[str]:
        return [
            f"search: {self.search}",
            f"scoping: {' / '.join(self.scoping)}",
            f"reads: {self.reads}",
            f"decay + archive: {'yes' if self.decay and self.archive else 'no'}",
            f"own retrieval log: {'yes' if self.retrieval_log else 'no'}",
            *self.limits,
        ]


@dataclass(frozen=True)
class Item:
    """One memory a search returned: its id (a provider without ids gets one from a hash of the
    text) and its text, with its cold-storage banner when archived."""

    id: str
    text: str


def text_id(text: str) -> str:
    """An id for a memory a provider returned without one (never its words)."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Found:
    """What one search returned, in rank order. ``relevant`` is False when the provider said only
    near misses were found (then nothing is put in front of the model)."""

    items: tuple[Item, ...] = ()
    relevant: bool = False
    considered: int = 0
    """How many memories the provider considered (the items, plus any it left out)."""
    mode: str = ""


@dataclass(frozen=True)
class Search:
    query: str
    top_k: int = 5
    include_archived: bool = False
    max_tokens: int = 2_000
    scope: Scope | None = None


class Provider(ABC):
    """A memory provider over one MCP connection. Enter it (``async with``) before calling it."""

    #: The provider's name in the retrieval log and in messages.
    name: str = "provider"
    label: str = "the provider"

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._tasks: TaskGroup | None = None
        self._link: Link | None = None

    def apply(self, settings: HostSettings) -> None:  # noqa: B027 - most providers need nothing
        """Take the settings the provider can honour only when it starts (before entering)."""

    async def __aenter__(self) -> Provider:
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        self._link = Link(self._command_endpoint(), self._tasks, label=self.label)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._tasks is None:
            return
        self._tasks.cancel_scope.cancel()
        assert self._link is not None
        self._link.drop()
        await self._tasks.__aexit__(None, None, None)
        self._tasks = self._link = None

    def _command_endpoint(self) -> Endpoint:
        return self.endpoint

    @property
    def link(self) -> Link:
        if self._link is None:
            raise RuntimeError(f"use the provider as `async with {type(self).__name__}(...) as provider:`")
        return self._link

    @abstractmethod
    async def search(self, request: Search) -> Found:
        """One search; raises ``AlmanacUnavailable`` or ``AlmanacRefused`` (the caller bounds it)."""

    @abstractmethod
    async def save(
        self, statement: str, *, deadline: float, importance: float | None = None, scope: Scope | None = None
    ) -> None:
        """Save one memory, trying again until ``deadline`` (an ``anyio.current_time()``)."""

    @abstractmethod
    async def state(self, timeout: float = OP_LIMIT_S) -> ProviderState:
        """Which of the three states the provider is in, by one real call within ``timeout``
        (at most :data:`OP_LIMIT_S`)."""

    @abstractmethod
    def notes(self) -> Notes:
        """What it can and cannot do (refined by what :meth:`state` learnt, when it has run)."""
