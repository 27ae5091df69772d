"""The shapes tool results take on the wire (structured output), and how store records map to them."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.store.facts import Duplicate, FactRecord, FactValue
from engine.store.model import LogEntry, Note, State, format_time


@dataclass(frozen=True)
class Closed:
    """The value a supersede closed."""

    object: str
    event_id: str
    valid_from: str
    valid_to: str


@dataclass(frozen=True)
class Receipt:
    action: str  # store | supersede | nochange | retire | restore
    event_id: str | None
    id: str
    kind: str  # fact | note | log
    scope: str | None = None
    source: str | None = None
    source_verified: bool = False
    closed: Closed | None = None
    possible_duplicates: list[Duplicate] = field(default_factory=list)
    path: str | None = None


@dataclass(frozen=True)
class FactOut:
    id: str
    subject: str
    predicate: str
    object: str
    statement: str | None
    scope: str | None
    source: str | None
    source_verified: bool
    current: bool
    valid_from: str
    valid_to: str | None
    event_id: str
    state: str


@dataclass(frozen=True)
class NoteOut:
    id: str
    kind: str  # note | log
    text: str
    created: str | None
    scope: str | None
    tags: list[str]
    importance: float | None
    source: str | None
    source_verified: bool
    state: str
    path: str


@dataclass(frozen=True)
class Retrieved:
    facts: list[FactOut]
    notes: list[NoteOut]


def fact_out(value: FactValue, record: FactRecord) -> FactOut:
    return FactOut(
        id=value.fact_id,
        subject=value.subject,
        predicate=value.predicate,
        object=value.object,
        statement=value.statement,
        scope=value.scope,
        source=None if value.source is None else value.source.name,
        source_verified=value.source is not None and value.source.verified,
        current=value is record.current,
        valid_from=format_time(value.valid_from),
        valid_to=None if value.valid_to is None else format_time(value.valid_to),
        event_id=value.event_id,
        state=State.RETIRED.value if record.retired else State.LIVE.value,
    )


def note_out(note: Note, state: State, path: str) -> NoteOut:
    return NoteOut(
        id=note.id,
        kind="note",
        text=note.body,
        created=None if note.created is None else format_time(note.created),
        scope=note.scope,
        tags=list(note.tags),
        importance=note.importance,
        source=None if note.source is None else note.source.name,
        source_verified=note.source is not None and note.source.verified,
        state=state.value,
        path=path,
    )


def log_out(entry: LogEntry, state: State, path: str) -> NoteOut:
    return NoteOut(
        id=entry.id,
        kind="log",
        text=entry.text,
        created=format_time(entry.time),
        scope=entry.scope,
        tags=[],
        importance=None,
        source=None if entry.source is None else entry.source.name,
        source_verified=entry.source is not None and entry.source.verified,
        state=state.value,
        path=path,
    )
