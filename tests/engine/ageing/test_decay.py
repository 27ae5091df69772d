"""Decay scores and the ranking floor (pure): ``life:decay``, ``life:rank-floors``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.ageing import decay

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def days(n: float) -> datetime:
    return T0 + timedelta(days=n)


@pytest.mark.req("life:decay")
def test_decay_is_half_per_half_life_from_the_latest_of_updated_and_last_cited() -> None:
    fresh = decay.Aging(created=T0)
    assert decay.score(fresh, T0, 60) == 1.0
    assert decay.score(fresh, days(60), 60) == pytest.approx(0.5)
    assert decay.score(fresh, days(120), 60) == pytest.approx(0.25)
    cited = decay.Aging(created=T0, updated=days(10), last_cited=days(100))
    assert decay.anchor(cited) == days(100)
    assert decay.score(cited, days(160), 60) == pytest.approx(0.5)
    edited = decay.Aging(created=T0, updated=days(100), last_cited=days(10))
    assert decay.score(edited, days(160), 60) == pytest.approx(0.5)
    assert decay.score(decay.Aging(created=None), days(999), 60) == 1.0  # no time known: nothing to age


@pytest.mark.req("life:decay")
def test_importance_changes_the_half_life_and_pins_at_point_nine() -> None:
    assert decay.half_life(60, None) == 60 and decay.half_life(60, 0.5) == 60
    assert decay.half_life(60, 0.7) == 120 and decay.half_life(60, 0.3) == 30
    important = decay.Aging(created=T0, importance=0.8)
    assert decay.score(important, days(120), 60) == pytest.approx(0.5)
    trivial = decay.Aging(created=T0, importance=0.2)
    assert decay.score(trivial, days(30), 60) == pytest.approx(0.5)
    pinned = decay.Aging(created=T0, importance=0.9)
    assert decay.score(pinned, days(3650), 60) == 1.0
    assert not decay.archive_candidate(pinned, days(3650), 60)


@pytest.mark.req("life:archive")
def test_below_a_quarter_is_an_archive_candidate() -> None:
    note = decay.Aging(created=T0)
    assert not decay.archive_candidate(note, days(119), 60)
    assert decay.archive_candidate(note, days(121), 60)
    assert not decay.archive_candidate(decay.Aging(created=T0, importance=0.75), days(200), 60)


@pytest.mark.req("life:rank-floors")
def test_the_decay_nudge_is_bounded() -> None:
    assert decay.nudge(1.0) == 0.0
    assert decay.nudge(0.0) == pytest.approx(-decay.DECAY_WEIGHT)
    assert -decay.DECAY_WEIGHT <= decay.nudge(0.37) <= 0.0
