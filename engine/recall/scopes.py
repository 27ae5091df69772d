"""The scope rule for facts (pure, ``recall:scope``).

Asked with a scope, recall sees that scope's memories plus unscoped ones. When both a scoped and
an unscoped fact exist for the same subject + predicate, the scoped one wins: the unscoped value
is left out and the winner says so in ``scope_note``. Without a scope every scope is seen and
nothing is replaced. A limit without unscoped memories (a pinned connection that does not read
them) sees its scope's facts alone and is told nothing about unscoped ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from engine.index.schema import FactRow
from engine.scope import Limit, within
from engine.store.ids import fact_id


@dataclass(frozen=True)
class FactHit:
    row: FactRow
    score: float
    confidence: float
    scope_note: str | None = None


def counterparts(rows: Sequence[FactRow], scope: str) -> list[str]:
    """The ids whose rows :func:`scope_rule` needs: each fact's scoped and unscoped twin."""
    out: list[str] = []
    for row in rows:
        out.append(fact_id(row.subject_key, row.predicate_key, scope))
        out.append(fact_id(row.subject_key, row.predicate_key, None))
    return list(dict.fromkeys(out))


def scope_rule(found: Sequence[FactHit], limit: Limit | None, twins: Mapping[str, FactRow]) -> list[FactHit]:
    """``found`` with unscoped facts replaced by their scoped twin (``twins``: rows by id)."""
    if limit is None:
        return list(found)
    if not limit.unscoped:
        return [hit for hit in found if hit.row.scope == limit.scope]
    scope = limit.scope
    note = f"the value for scope {scope} wins over the unscoped one"
    out: list[FactHit] = []
    seen: set[str] = set()
    for hit in found:
        row = hit.row
        scoped = twins.get(fact_id(row.subject_key, row.predicate_key, scope))
        unscoped = twins.get(fact_id(row.subject_key, row.predicate_key, None))
        if row.scope is None and scoped is not None:
            hit = replace(hit, row=scoped, scope_note=note)
        elif row.scope == scope and unscoped is not None:
            hit = replace(hit, scope_note=note)
        elif not within(limit, row.scope):
            continue
        if hit.row.memory not in seen:
            seen.add(hit.row.memory)
            out.append(hit)
    return out
