"""Decay scores and the ranking floor (pure): ``life:decay``, ``life:rank-floors``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.ageing import decay as D

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def days(n: float) -> datetime:
    return T0 + timedelta(days=n)


@pytest.mark.req("life:decay")
def test_decay_is_half_per_half_life_from_the_latest_of_updated_and_last_cited() -> None:
    fresh = D.Aging(created=T0)
    assert D.score(fresh, T0, 60) == 1.0
    assert D.score(fresh, days(60), 60) == pytest.approx(0.5)
    assert D.score(fresh, days(120), 60) == pytest.approx(0.25)
    cited = D.Aging(created=T0, updated=days(10), last_cited=days(100))
    assert D.anchor(cited) == days(100)
    assert D.score(cited, days(160), 60) == pytest.approx(0.5)
    edited = D.Aging(created=T0, updated=days(100), last_cited=days(10))
    assert D.score(edited, days(160), 60) == pytest.approx(0.5)
    assert D.score(D.Aging(created=None), days(999), 60) == 1.0  # no time known: nothing to age


@pytest.mark.req("life:decay")
def test_importance_changes_the_half_life_and_pins_at_point_nine() -> None:
    assert D.half_life(60, None) == 60 and D.half_life(60, 0.5) == 60
    assert D.half_life(60, 0.7) == 120 and D.half_life(60, 0.3) == 30
    important = D.Aging(created=T0, importance=0.8)
    assert D.score(important, days(120), 60) == pytest.approx(0.5)
    trivial = D.Aging(created=T0, importance=0.2)
    assert D.score(trivial, days(30), 60) == pytest.approx(0.5)
    pinned = D.Aging(created=T0, importance=0.9)
    assert D.score(pinned, days(3650), 60) == 1.0
    assert not D.archive_candidate(pinned, days(3650), 60)


@pytest.mark.req("life:archive")
def test_below_a_quarter_is_an_archive_candidate() -> None:
    note = D.Aging(created=T0)
    assert not D.archive_candidate(note, days(119), 60)
    assert D.archive_candidate(note, days(121), 60)
    assert not D.archive_candidate(D.Aging(created=T0, importance=0.75), days(200), 60)


@pytest.mark.req("life:rank-floors")
def test_the_decay_nudge_is_bounded() -> None:
    assert D.nudge(1.0) == 0.0
    assert D.nudge(0.0) == pytest.approx(-D.DECAY_WEIGHT)
    assert -D.DECAY_WEIGHT <= D.nudge(0.37) <= 0.0
