"""The manual an agent reads: server instructions, tool descriptions, described parameter types.

Every session pays for this text in tokens, so it is short; it says what each tool is for, when to
use it instead of its neighbours, and gives one example. Limits are published in the JSON schema
(``maxLength``, ``minimum``...) but enforced by the engine's own checks, so a refusal keeps its
specific code (``too_long``, ``bad_scope``...).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from engine.store.text import MAX_KEY, MAX_OBJECT, MAX_REASON, MAX_SOURCE, MAX_STATEMENT, MAX_TAG, MAX_TAGS

INSTRUCTIONS = """\
Almanac is your durable memory, shared by every client of this owner.
1. Before you work, call get_context with what you are about to do (and the project's scope).
2. When a decision is made or you learn a fact, remember it: subject/predicate/object make a fact \
(a new value supersedes the old one, history is kept); a statement alone is a note. \
remember_note logs what happened today.
3. When a memory is wrong, save the right value (facts) or retire_memory it; nothing is deleted.
Scopes such as project:fjord keep memories with one project."""

WRITE_TOOLS = frozenset({"remember", "save_memory", "remember_note", "retire_memory", "restore_memory"})

REMEMBER = (
    "Save one memory worth keeping across sessions: a decision, a preference, a fact. With subject, "
    "predicate and object it is a fact: a later object for the same subject + predicate + scope "
    "supersedes it (the old value stays as history), so this is also how a fact is corrected. "
    "Without them the statement is kept whole as a note. Use remember_note instead for a line in "
    "today's work log. Saving the same thing again changes nothing.\n"
    'Example: remember(statement="Fjord moved to Postgres 16", subject="Fjord", '
    'predicate="database", object="Postgres 16", scope="project:fjord")'
)
SAVE_MEMORY = (
    "Save a fact as subject, predicate and object (remember with all three does the same; use this "
    "when you have the triple but no sentence). A new object for the same subject + predicate + "
    "scope supersedes the old value, which stays as history.\n"
    'Example: save_memory(subject="Fjord", predicate="deploy target", object="fly.io")'
)
REMEMBER_NOTE = (
    "Append one timestamped line to a day's work log (today, UTC, by default): what happened, "
    "progress, events. For a decision or fact to recall later use remember instead.\n"
    'Example: remember_note(text="Migrated the users table; 3 rows needed manual fixes")'
)
RETRIEVE_MEMORY = (
    "Look up facts exactly by subject and/or predicate, or one memory by id. Returns current values; "
    "include_history adds replaced values (valid_from/valid_to); as_of gives what was current then. "
    "Use get_context instead to search by meaning.\n"
    'Example: retrieve_memory(subject="Fjord", predicate="database", include_history=true)'
)
RETIRE_MEMORY = (
    "Take a wrong or obsolete memory out of recall without deleting it; restore_memory puts it back "
    "exactly. To change a fact's value, save the new value instead (it supersedes the old one). "
    "Retiring twice changes nothing.\n"
    'Example: retire_memory(id="nte_01JD…", reason="the meeting was cancelled")'
)
RESTORE_MEMORY = (
    "Put a retired memory back into recall exactly as it was (same id, content and history); an\n"
    "archived note comes back from cold storage without its banner.\n"
    'Example: restore_memory(id="nte_01JD…")'
)
GET_CONTEXT = (
    "Read this before you work: the current facts and the closest notes and log entries for a task, "
    "within a token budget. Facts come first; notes match by meaning and by words. relevant=false "
    "means nothing closely matched (the items are only the nearest). With a scope you see that "
    "scope's memories plus unscoped ones (a scoped fact wins over an unscoped one for the same "
    "subject and predicate); without one, every scope. Use retrieve_memory for exact lookups and "
    "history.\n"
    'Example: get_context(query="set up the Fjord database", scope="project:fjord")'
)
MEMORY_STATUS = (
    "How the memory is doing: counts by kind and state, storage sizes, indexing backlog, the "
    "embedding provider and its state, and the settings in force. Use it when recall looks wrong "
    "or slow.\nExample: memory_status()"
)


def pinned_note(scope: str, *, unscoped: bool) -> str:
    """What a connection pinned to ``scope`` is told in every tool's description."""
    reads = "it plus unscoped memories" if unscoped else "only it"
    return (
        f"\nThis connection is pinned to scope '{scope}': writes, retires and restores only in it; "
        f"reads see {reads}; a scope argument may only name it."
    )


def _text(description: str, limit: int) -> Any:
    return Field(description=description, json_schema_extra={"minLength": 1, "maxLength": limit})


Statement = Annotated[
    str, _text(f"The words to remember, kept whole (1-{MAX_STATEMENT:,} characters)", MAX_STATEMENT)
]
Subject = Annotated[
    str, _text(f"What the fact is about, e.g. 'Fjord' (one line, ≤ {MAX_KEY} characters)", MAX_KEY)
]
Predicate = Annotated[
    str, _text(f"Which property of it, e.g. 'database' (one line, ≤ {MAX_KEY} characters)", MAX_KEY)
]
Object = Annotated[
    str, _text(f"Its value, e.g. 'Postgres 16' (one line, ≤ {MAX_OBJECT} characters)", MAX_OBJECT)
]
LogText = Annotated[str, _text(f"The line to log (1-{MAX_STATEMENT:,} characters)", MAX_STATEMENT)]
MemoryId = Annotated[
    str,
    Field(
        description="A memory id as returned by a receipt or a read: fct_…, nte_… or log_…",
        json_schema_extra={"pattern": "^(fct|nte|log)_"},
    ),
]
Scope = Annotated[
    str | None,
    Field(
        description=(
            "Optional project label, e.g. 'project:fjord': 1-64 characters of a-z 0-9 ':_./-', "
            "starting with a letter or digit, no '..'"
        ),
        json_schema_extra={"pattern": "^[a-z0-9][a-z0-9:_./-]{0,63}$"},
    ),
]
Source = Annotated[
    str | None,
    Field(
        description=(
            "Who is writing, e.g. 'nightly-agent'; only used when the connection has no name of its "
            f"own (it is then marked self-reported). One line, ≤ {MAX_SOURCE} characters"
        ),
        json_schema_extra={"maxLength": MAX_SOURCE},
    ),
]
Tags = Annotated[
    list[str] | None,
    Field(
        description=f"Labels for a note, e.g. ['infra'] (≤ {MAX_TAGS} tags, each ≤ {MAX_TAG} characters)",
        json_schema_extra={"maxItems": MAX_TAGS},
    ),
]
Importance = Annotated[
    float | None,
    Field(
        description="How much a note matters, 0-1 (≥ 0.7 fades slower, ≥ 0.9 never fades; default none)",
        json_schema_extra={"minimum": 0, "maximum": 1},
    ),
]
StatementOptional = Annotated[
    str | None,
    Field(
        description=f"The sentence the fact was said with, kept with it (≤ {MAX_STATEMENT:,} characters)",
        json_schema_extra={"maxLength": MAX_STATEMENT},
    ),
]
SubjectOptional = Annotated[
    str | None,
    Field(
        description="A fact's subject; alone it finds every predicate of that subject",
        json_schema_extra={"maxLength": MAX_KEY},
    ),
]
PredicateOptional = Annotated[
    str | None,
    Field(
        description="A fact's predicate; alone it finds that property across subjects",
        json_schema_extra={"maxLength": MAX_KEY},
    ),
]
ObjectOptional = Annotated[
    str | None,
    Field(
        description=f"A fact's value (with subject and predicate; ≤ {MAX_OBJECT} characters)",
        json_schema_extra={"maxLength": MAX_OBJECT},
    ),
]
IdOptional = Annotated[
    str | None,
    Field(description="One memory's id (fct_…, nte_… or log_…); returns that memory, retired or not"),
]
IncludeHistory = Annotated[
    bool, Field(description="Also return the values a fact had before (default false)")
]
AsOf = Annotated[
    str | None,
    Field(
        description=(
            "What was current at this time: ISO date (2026-11-30, meaning the end of that day UTC) "
            "or datetime with timezone (2026-11-30T14:00:00Z)"
        )
    ),
]
Day = Annotated[
    str | None,
    Field(
        description="The day's log to append to, YYYY-MM-DD (default today, UTC)",
        json_schema_extra={"pattern": r"^\d{4}-\d{2}-\d{2}$"},
    ),
]
Reason = Annotated[
    str | None,
    Field(
        description=f"Why it is retired, kept with it (≤ {MAX_REASON} characters)",
        json_schema_extra={"maxLength": MAX_REASON},
    ),
]
Query = Annotated[
    str | None,
    Field(
        description=("What you are about to work on, in your own words; omit it for the current facts only")
    ),
]
MaxTokens = Annotated[
    int | None,
    Field(
        description="Reply budget in tokens, 100-4000 (default 800); the whole reply fits it",
        json_schema_extra={"minimum": 100, "maximum": 4000},
    ),
]
IncludeArchived = Annotated[
    bool | None,
    Field(description="Also search cold storage (memories faded out by age); default from settings (off)"),
]
