"""What the store holds, as frozen values (no I/O here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Literal

EventKind = Literal["store", "supersede", "retire", "restore", "delete"]
EVENT_KINDS: tuple[EventKind, ...] = ("store", "supersede", "retire", "restore", "delete")


class State(StrEnum):
    """A note's or log entry's state is the directory it is in."""

    LIVE = "live"
    ARCHIVED = "archived"
    RETIRED = "retired"


@dataclass(frozen=True)
class Source:
    """Who wrote a memory. ``verified`` is true only for a connection name the gateway vouched for."""

    name: str
    verified: bool = False


@dataclass(frozen=True)
class Event:
    """One block of the append-only ledger.

    ``store``/``supersede`` carry a fact value (subject, predicate, object, statement).
    ``retire``/``restore`` name the memory they act on (``memory``: a fact, note or log id) and
    may carry a ``reason``; for a fact they also repeat its subject/predicate for readers.
    ``delete`` records the owner's permanent deletion of a retired memory: who and when, never
    what it said (every earlier block about that memory is erased from the ledger).
    """

    event_id: str
    kind: EventKind
    time: datetime
    memory: str
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    scope: str | None = None
    statement: str | None = None
    source: Source | None = None
    closes: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Note:
    """A note file: frontmatter + body. ``extra`` keeps frontmatter keys we do not own, in order.

    ``unread`` says why the file's frontmatter was not read (past the YAML limits of
    :mod:`engine.store._yaml`): the note is then its body alone, and its file is never rewritten
    (rewriting would drop the frontmatter); None for every note whose frontmatter was read."""

    id: str
    body: str
    created: datetime | None = None
    updated: datetime | None = None
    importance: float | None = None
    tags: tuple[str, ...] = ()
    scope: str | None = None
    source: Source | None = None
    citations: int | None = None
    last_cited: datetime | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    unread: str | None = None


@dataclass(frozen=True)
class LogEntry:
    """One timestamped entry of a day's log (``logs/YYYY/MM/DD.md``)."""

    id: str
    time: datetime
    text: str
    source: Source | None = None
    scope: str | None = None


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds and a ``Z``: ``2026-11-30T01:23:57.123456Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> datetime:
    """A stored time (string, or a datetime/date YAML already parsed) as an aware UTC datetime."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.strip())
    else:
        raise ValueError(f"not a time: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
