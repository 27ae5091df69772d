"""Timestamps as the control plane stores them: UTC ISO-8601 text that sorts as it reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utcnow() -> str:
    return datetime.now(UTC).strftime(_FORMAT)


def utc_in(seconds: float) -> str:
    """The timestamp ``seconds`` from now (negative: in the past)."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime(_FORMAT)


def iso(epoch: float) -> str:
    """Epoch seconds as the control plane's timestamp text."""
    return datetime.fromtimestamp(epoch, UTC).strftime(_FORMAT)


def epoch(text: str) -> float:
    """The control plane's timestamp text as epoch seconds."""
    return datetime.strptime(text, _FORMAT).replace(tzinfo=UTC).timestamp()
