"""Scope layers for deliberate loads and saves (pure).

The memory interface has four layers: **user** (no scope: every session of the workspace finds it),
**session**, **agent** and **turn**. A deliberate save may be pinned to one of the last three, and
a deliberate load may be limited to one: it then sees that layer's memories and the user layer's,
never another session's, agent's or turn's; and a load of the user layer (the automatic one)
sees no session's, agent's or turn's memories at all. The automatic path (``before_turn``/``after_turn``)
stays unscoped on purpose: a session-scoped memory would only ever be found by the session that
wrote it.

With Almanac a layer is the memory's scope, spelled ``<layer>:<id>`` (``session:7f3a``); Almanac's
own scope rule does the first part — a read limited to a scope sees that scope plus unscoped
memories (``docs/recall.md``) — and :func:`in_view` the second, on the reply (an unscoped read
there sees every scope). A provider that cannot separate layers says so in its notes and
saves into the user layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Layer = Literal["session", "agent", "turn"]
LAYERS: tuple[Layer, ...] = ("session", "agent", "turn")
#: What an id may hold so that ``<layer>:<id>`` is a valid Almanac scope (at most 64 characters).
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,55}$")


@dataclass(frozen=True)
class Scope:
    """One scope layer and its id, for example ``Scope.session("7f3a")``."""

    layer: Layer
    id: str

    def __post_init__(self) -> None:
        if self.layer not in LAYERS:
            raise ValueError(f"a scope layer is one of {', '.join(LAYERS)}, not {self.layer!r}")
        if not isinstance(self.id, str) or not _ID.match(self.id) or ".." in self.id:
            raise ValueError(
                f"a {self.layer} id is 1-56 characters of lowercase a-z, 0-9 and '_.-', starting "
                f"with a letter or digit, without '..'; not {self.id!r}"
            )

    @classmethod
    def session(cls, id: str) -> Scope:
        return cls("session", id)

    @classmethod
    def agent(cls, id: str) -> Scope:
        return cls("agent", id)

    @classmethod
    def turn(cls, id: str) -> Scope:
        return cls("turn", id)

    @property
    def label(self) -> str:
        """The Almanac scope this layer is stored under."""
        return f"{self.layer}:{self.id}"


def as_log(scope: Scope | None) -> dict[str, str]:
    """The scope as the retrieval log writes it: ``{}`` for the user layer."""
    return {} if scope is None else {scope.layer: scope.id}


def in_view(memory_scope: str | None, scope: Scope | None) -> bool:
    """Whether a load limited to ``scope`` (None: the user layer, the automatic path) shows a memory
    stored under ``memory_scope``: a layer's memories only to loads of that same layer; unscoped
    memories, and scopes that are not layers (``project:fjord``), to every load."""
    if memory_scope is None:
        return True
    layer = memory_scope.split(":", 1)[0]
    if layer not in LAYERS:
        return True
    return scope is not None and memory_scope == scope.label
