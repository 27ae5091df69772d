"""The owner's admin surface, served on the engine's Unix socket under ``/admin`` (never on ``/mcp``).

Agents never reach it: the gateway forwards only ``/mcp`` from clients and calls these routes itself
for a signed-in owner. Each concept is one module exposing ``routes(parts) -> list[BaseRoute]``;
this module composes them (add yours with one line in :func:`routes`). What they share — the
:class:`Parts` they may use and the JSON refusal built from the engine's one error tree (status 400
bad input, 403, 404 no such memory, 409 not allowed in this state) — is in :mod:`engine.admin.common`.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from engine.admin import activity, memories, settings, transfer
from engine.admin.common import Parts

__all__ = ["Parts", "routes"]


def routes(parts: Parts) -> list[BaseRoute]:
    """Every ``/admin`` route (one line per concept)."""
    return [
        *memories.routes(parts),
        *transfer.routes(parts),
        *settings.routes(parts),
        *activity.routes(parts),
    ]
