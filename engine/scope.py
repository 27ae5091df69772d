"""Who may see what: the scope rules, in one place (pure; ``recall:scope``, ``auth:pinned-scope``).

A memory has a scope or none. A connection may be *pinned* to a scope: it then sees that scope's
memories and unscoped ones, writes only into its scope, and cannot ask to read another. A read may
also be *limited* to a scope (the one asked for, else the pinned one): it sees that scope plus
unscoped memories. Archived memories are seen by recall only when asked for.

Used by :mod:`engine.memory` (writes, retrieve, status) and :mod:`engine.recall` (search, facts).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import Forbidden
from engine.store.text import check_scope


@dataclass(frozen=True)
class Caller:
    """Who is calling. ``connection`` is set only from the gateway's authenticated identity."""

    connection: str | None = None
    read_only: bool = False
    pinned_scope: str | None = None
    client_name: str | None = None
    connection_id: str | None = None  # the gateway's id of the connection, when it vouched for one


def within(limit: str | None, memory_scope: str | None) -> bool:
    """Whether a memory of ``memory_scope`` is inside ``limit`` (None: everything; else it + unscoped)."""
    return limit is None or memory_scope in (None, limit)


def visible(caller: Caller, memory_scope: str | None) -> bool:
    """Whether ``caller`` may see a memory of ``memory_scope`` at all (pinned: its scope + unscoped)."""
    return within(caller.pinned_scope, memory_scope)


def read_scope(caller: Caller, scope: str | None) -> str | None:
    """The scope a read is limited to: the one asked for, else the connection's pinned scope."""
    scope = check_scope(scope)
    if caller.pinned_scope is not None and scope not in (None, caller.pinned_scope):
        raise Forbidden(
            f"this connection is pinned to scope {caller.pinned_scope!r}; it cannot read {scope!r}"
        )
    return scope if scope is not None else caller.pinned_scope


def write_scope(caller: Caller, scope: str | None) -> str | None:
    """The scope a write goes into: a pinned connection's own (asking for another is refused)."""
    scope = check_scope(scope)
    if caller.pinned_scope is None:
        return scope
    if scope is not None and scope != caller.pinned_scope:
        raise Forbidden(
            f"this connection is pinned to scope {caller.pinned_scope!r}: "
            f"omit scope or pass {caller.pinned_scope!r} (not {scope!r})"
        )
    return caller.pinned_scope


def shown(state: str, memory_scope: str | None, limit: str | None, include_archived: bool) -> bool:
    """Whether recall, limited to ``limit``, lists an indexed memory in ``state`` (live | archived)."""
    if state == "archived" and not include_archived:
        return False
    return within(limit, memory_scope)
