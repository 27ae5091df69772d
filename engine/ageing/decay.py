"""How a note ages (pure, ``life:decay``, ``life:rank-floors``).

A note's decay score is ``0.5 ^ (age / half_life)``. Age runs from the latest of ``updated`` and
``last-cited`` (else ``created``). Importance changes the half-life, not the score: at or above
:data:`LONG_LIVED` it is doubled, at or below :data:`SHORT_LIVED` halved; at or above
:data:`PINNED` the note never decays (score 1.0) and is never archived. Below
:data:`ARCHIVE_BELOW` a note is an archive candidate.

In ranking, decay is a bounded nudge (:func:`nudge`): at most :data:`DECAY_WEIGHT` off a fused
score, so it only reorders matches whose relevance is within that margin of each other and can
never push a strong match below a clearly weaker one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

LONG_LIVED = 0.7
SHORT_LIVED = 0.3
PINNED = 0.9
ARCHIVE_BELOW = 0.25
#: The most decay can take off a fused score (which spans about 0 … 4 per query).
DECAY_WEIGHT = 0.05
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class Aging:
    """What decay needs to know about one note."""

    created: datetime | None
    updated: datetime | None = None
    last_cited: datetime | None = None
    importance: float | None = None


def pinned(importance: float | None) -> bool:
    return importance is not None and importance >= PINNED


def half_life(base_days: float, importance: float | None) -> float:
    """The effective half-life in days (for a pinned note it does not matter: it never decays)."""
    if importance is not None and importance >= LONG_LIVED:
        return base_days * 2
    if importance is not None and importance <= SHORT_LIVED:
        return base_days / 2
    return base_days


def anchor(aging: Aging) -> datetime | None:
    """Where age is measured from: the latest of updated and last-cited, else created."""
    touched = [t for t in (aging.updated, aging.last_cited) if t is not None]
    return max(touched) if touched else aging.created


def age_days(aging: Aging, now: datetime) -> float:
    start = anchor(aging)
    if start is None:
        return 0.0
    return max((now - start).total_seconds() / SECONDS_PER_DAY, 0.0)


def score(aging: Aging, now: datetime, base_half_life_days: float) -> float:
    """``0.5 ^ (age / half_life)``; 1.0 for a pinned note."""
    if pinned(aging.importance):
        return 1.0
    return float(0.5 ** (age_days(aging, now) / half_life(base_half_life_days, aging.importance)))


def archive_candidate(aging: Aging, now: datetime, base_half_life_days: float) -> bool:
    return not pinned(aging.importance) and score(aging, now, base_half_life_days) < ARCHIVE_BELOW


def nudge(decay: float, weight: float = DECAY_WEIGHT) -> float:
    """What decay adds to a fused score: 0 for a fresh note, down to ``-weight`` for a faded one."""
    return weight * (min(max(decay, 0.0), 1.0) - 1.0)
