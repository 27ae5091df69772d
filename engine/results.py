"""The shapes tool results take on the wire (structured output), and how store records map to them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic import Field as PField

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
    action: str  # store | supersede | nochange | retire | restore | delete
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


# -- get_context and memory_status: typed replies (engine:surface) --------------------------------
# The recall code builds plain dicts (their size is what the token budget counts); the tool layer
# validates them against these models, which are also the tools' published output schemas. A field
# added to a reply without being added here is refused (extra="forbid"), never silently dropped.


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ContextItem(_Reply):
    """One memory in a get_context reply."""

    id: str = PField(description="The memory's id: fct_…, nte_… or log_…")
    kind: Literal["fact", "note", "log"] = PField(description="fact, note or log (a log entry)")
    text: str = PField(description="The words (a fact's statement); at most 1,000 characters, see cut")
    score: float = PField(description="How well it matched; items are ordered best first")
    reason: Literal["fact", "keyword", "semantic", "both", "graph"] = PField(
        description="How it matched: fact, keyword, semantic (meaning), both, or graph (linked from a match)"
    )
    source: str | None = PField(description="Who wrote it (a connection's name, or self-reported)")
    created: str | None = PField(description="When it was saved, ISO 8601 UTC")
    scope: str | None = PField(description="Its scope label, or null when unscoped")
    tags: list[str] = PField(description="A note's labels")
    subject: str | None = PField(default=None, description="A fact's subject")
    predicate: str | None = PField(default=None, description="A fact's predicate")
    object: str | None = PField(default=None, description="A fact's current value")
    cut: bool | None = PField(default=None, description="true when the text was shortened to fit")
    scope_note: str | None = PField(
        default=None, description="Which scope's value won when scoped and unscoped facts disagreed"
    )
    archived: bool | None = PField(default=None, description="true for a memory from cold storage")
    banner: str | None = PField(default=None, description="The cold-storage warning that travels with it")


class Dropped(_Reply):
    count: int = PField(description="How many matches were left out for the token budget")
    ids: list[str] = PField(description="Some of their ids (retrieve_memory can read them)")


class ContextReply(_Reply):
    """What get_context found: facts first, then notes, within the token budget."""

    facts: list[ContextItem] = PField(description="Current facts that match, best first")
    notes: list[ContextItem] = PField(description="Notes and log entries that match, best first")
    retrieval: Literal["hybrid", "semantic", "keyword", "facts"] = PField(
        description=(
            "How notes were matched: hybrid (meaning + words), semantic, keyword (meaning search off "
            "or still building), facts (no query, or no note search could answer)"
        )
    )
    relevant: bool = PField(description="false: nothing closely matched; the items are only the nearest")
    tokens: int = PField(description="Tokens this reply uses (≤ max_tokens)")
    dropped: Dropped = PField(description="Matches left out for the budget")


class KindCounts(_Reply):
    live: int = PField(description="In recall")
    archived: int = PField(description="In cold storage (faded by age)")
    retired: int = PField(description="Taken out of recall on purpose (restorable)")


class Counts(_Reply):
    fact: KindCounts
    note: KindCounts
    log: KindCounts


class StorageBytes(_Reply):
    store: int = PField(description="Bytes of the memory itself (Markdown files and the facts ledger)")
    index: int = PField(description="Bytes of the rebuildable search index")


class IndexState(_Reply):
    chunks: int = PField(description="Indexed pieces of notes and log entries")
    facts: int = PField(description="Indexed fact values")
    links: int = PField(description="Wikilinks between notes")
    waiting_for_embeddings: int = PField(description="Pieces not yet searchable by meaning (backlog)")
    sessions_waiting: int = PField(description="Day groups whose summary vector is being rebuilt")
    model_id: str | None = PField(description="The embedding model the stored vectors belong to")
    dim: int | None = PField(description="Their dimension")
    not_indexed: int = PField(description="Memories too large to index (kept in the store, readable by id)")
    state: Literal["catching_up", "ready", "failed"] = PField(
        description="catching_up while the index is compared with the store after a start; ready after"
    )
    done: int = PField(description="Memories compared so far")
    total: int = PField(description="Memories to compare")


class FileProblemOut(_Reply):
    path: str = PField(description="The file, relative to the workspace")
    line: int = PField(description="Where its first problem is (1-based)")
    problem: str = PField(description="What is wrong with it")
    count: int = PField(description="How many problems it has")


class NotIndexed(_Reply):
    path: str = PField(description="The file, relative to the workspace")
    bytes: int = PField(description="The memory's size")
    reason: str = PField(description="Why it is not indexed")


class EmbeddingState(_Reply):
    provider: Literal["local", "vertex", "remote", "off"] = PField(
        description="local, vertex, remote (the host's shared embedder service) or off"
    )
    state: Literal["ready", "not_set_up", "not_available", "checking"] = PField(
        description=(
            "ready; not_set_up (installed, but a setup step is missing); not_available; "
            "checking (the first probe has not finished)"
        )
    )
    model_id: str = PField(description="The model in use")
    dim: int | None = PField(default=None, description="Its vector dimension")
    detail: str | None = PField(default=None, description="What is wrong, when it is not ready")
    notes: list[str] | None = PField(default=None, description="What the provider can and cannot do")


class StatusReply(_Reply):
    """The memory's health: counts, sizes, index backlog, embedding provider, settings in force."""

    counts: Counts = PField(description="Memories by kind and state (those this connection may see)")
    storage_bytes: StorageBytes
    index: IndexState
    embedding: EmbeddingState
    settings: dict[str, Any] = PField(description="The recall and lifecycle settings in force, by name")
    settings_origin: dict[str, Literal["default", "instance", "workspace", "command line"]] = PField(
        description="Where each setting's value came from: default, instance, workspace or command line"
    )
    settings_problems: list[str] = PField(description="Settings layers that were ignored, and why")
    newest_memory: str | None = PField(description="When the newest memory was saved, ISO 8601")
    unreadable_files: int = PField(description="Store files that could not be read (whole) and are skipped")
    problems: list[FileProblemOut] = PField(
        description="Those files by name (at most 50; empty for a connection pinned to a scope)"
    )
    not_indexed: list[NotIndexed] = PField(
        description="Memories too large to index, by file (at most 50; empty for a pinned connection)"
    )
