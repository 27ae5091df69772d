"""Who may see what: the scope rules, in one place (pure; ``recall:scope``, ``gw:isolation``).

A memory has a scope or none. A connection may be *pinned* to a scope: it then writes only into
its scope, retires and restores only memories of its scope, and cannot ask to read another. What
it reads is its scope — plus unscoped memories when the owner chose so for that connection
(``Caller.reads_unscoped``; without that choice, its scope alone). A read may also be *limited*
(:class:`Limit`) to a scope (the one asked for, else the pinned one): it sees that scope plus
unscoped memories, unless the limit is a pinned connection's that does not read them. Archived
memories are seen by recall only when asked for.

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
    reads_unscoped: bool = False  # pinned: whether it also reads unscoped memories (the owner's choice)


@dataclass(frozen=True)
class Limit:
    """What a read is limited to: memories of ``scope``, and unscoped ones when ``unscoped``."""

    scope: str
    unscoped: bool = True


def within(limit: Limit | None, memory_scope: str | None) -> bool:
    """Whether a memory of ``memory_scope`` is inside ``limit`` (None: everything)."""
    if limit is None or memory_scope == limit.scope:
        return True
    return memory_scope is None and limit.unscoped


def pinned_limit(caller: Caller) -> Limit | None:
    """What ``caller`` may read at all: its pinned scope (with unscoped memories if it reads them)."""
    if caller.pinned_scope is None:
        return None
    return Limit(caller.pinned_scope, caller.reads_unscoped)


def visible(caller: Caller, memory_scope: str | None) -> bool:
    """Whether ``caller`` may see a memory of ``memory_scope`` at all."""
    return within(pinned_limit(caller), memory_scope)


def changeable(caller: Caller, memory_scope: str | None) -> bool:
    """Whether ``caller`` may retire, restore or delete a memory of ``memory_scope``: a pinned
    connection only those of its own scope (never unscoped ones, even when it reads them)."""
    return caller.pinned_scope is None or memory_scope == caller.pinned_scope


def read_scope(caller: Caller, scope: str | None) -> Limit | None:
    """The limit of a read: the scope asked for, else the connection's pinned scope."""
    scope = check_scope(scope)
    if caller.pinned_scope is not None:
        if scope not in (None, caller.pinned_scope):
            raise Forbidden(
                f"this connection is pinned to scope {caller.pinned_scope!r}; it cannot read {scope!r}"
            )
        return pinned_limit(caller)
    return None if scope is None else Limit(scope)


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


def shown(state: str, memory_scope: str | None, limit: Limit | None, include_archived: bool) -> bool:
    """Whether recall, limited to ``limit``, lists an indexed memory in ``state`` (live | archived)."""
    if state == "archived" and not include_archived:
        return False
    return within(limit, memory_scope)
