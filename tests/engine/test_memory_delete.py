"""Permanent deletion of a retired memory (``life:delete``) on a real workspace directory: the content
leaves the files and the ledger, a ``delete`` event without content records it, and a reload (or a
crash half way) keeps it deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import NotFound, NotRetired, ReadOnly
from engine.memory import Memory
from engine.scope import Caller
from engine.store import ledger
from engine.store.model import Event, Source, State
from engine.store.workspace import Workspace
from tests.engine.conftest import Clock

pytestmark = pytest.mark.req("life:delete")

AGENT = Caller(connection="Claude Code on laptop")
OWNER = Caller(connection="Dashboard")
OWNER_SOURCE = Source("Dashboard", verified=True)


def store_text(root: Path) -> str:
    """Every Markdown file of the store, as one text (what a grep of the directory would see)."""
    return "".join(p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md")))


def events(root: Path) -> list[Event]:
    found: list[Event] = []
    for path in sorted((root / "facts").glob("*.md")):
        found += ledger.parse_ledger(path.read_text(encoding="utf-8")).events
    return found


def test_a_retired_note_is_deleted_for_good(root: Path, memory: Memory, workspace: Workspace) -> None:
    keep = memory.remember(AGENT, "The staging host is kelp.")
    note = memory.remember(AGENT, "The launch code word is PERIWINKLE.", tags=["secret"])
    memory.retire(AGENT, note.id, reason="should never have been saved")
    receipt = memory.delete(OWNER, note.id)
    assert receipt.action == "delete" and receipt.kind == "note" and receipt.source == "Dashboard"
    text = store_text(root)
    assert "PERIWINKLE" not in text and "should never have been saved" not in text
    assert "kelp" in text  # nothing else was touched
    assert not list((root / "retired" / "notes").rglob("*.md"))
    kinds = [(e.kind, e.memory) for e in events(root)]
    assert kinds == [("delete", note.id)]  # its retire block is erased; only the deletion stays
    gone = events(root)[0]
    assert gone.source is not None and gone.source.name == "Dashboard"
    assert gone.reason is None and gone.subject is None and gone.object is None
    with pytest.raises(NotFound, match="already deleted permanently"):
        memory.delete(OWNER, note.id)
    with pytest.raises(NotFound):
        memory.retrieve(OWNER, memory_id=note.id)
    assert memory.retrieve(OWNER, memory_id=keep.id).notes[0].text == "The staging host is kelp."
    workspace.load()  # what a restart reads
    assert note.id not in workspace.notes and note.id in workspace.deleted


def test_a_retired_log_entry_is_deleted_for_good(root: Path, memory: Memory, workspace: Workspace) -> None:
    memory.remember_note(AGENT, "Deployed v2 to staging.")
    entry = memory.remember_note(AGENT, "Rotated the key to hunter2-ZEBRA.")
    memory.retire(AGENT, entry.id)
    memory.delete(OWNER, entry.id)
    text = store_text(root)
    assert "ZEBRA" not in text and "Deployed v2 to staging." in text
    workspace.load()
    assert entry.id not in workspace.logs and [e.kind for e in events(root)] == ["delete"]


def test_a_retired_fact_is_erased_from_the_ledger(root: Path, memory: Memory, workspace: Workspace) -> None:
    other = memory.save_memory(AGENT, "Fjord", "host", "kelp")
    memory.save_memory(AGENT, "Fjord", "database", "MySQL")
    fact = memory.save_memory(AGENT, "Fjord", "database", "Postgres", statement="Fjord runs Postgres.")
    memory.retire(AGENT, fact.id, reason="wrong")
    memory.delete(OWNER, fact.id)
    text = store_text(root)
    assert "MySQL" not in text and "Postgres" not in text and "database" not in text
    assert "kelp" in text
    assert [(e.kind, e.memory) for e in events(root)] == [("store", other.id), ("delete", fact.id)]
    workspace.load()
    assert fact.id not in workspace.facts.records and fact.id in workspace.deleted
    assert memory.retrieve(OWNER, subject="Fjord").facts[0].object == "kelp"
    # the same subject and predicate said again is a new fact with the same id, its history fresh
    again = memory.save_memory(AGENT, "Fjord", "database", "SQLite")
    assert again.id == fact.id and again.action == "store"
    history = memory.retrieve(OWNER, memory_id=fact.id, include_history=True).facts
    assert [f.object for f in history] == ["SQLite"]
    assert fact.id not in workspace.deleted
    workspace.load()
    assert fact.id not in workspace.deleted and workspace.facts.records[fact.id].current is not None


@pytest.mark.parametrize("state", ["live", "archived"])
def test_only_a_retired_memory_can_be_deleted(root: Path, memory: Memory, state: str) -> None:
    note = memory.remember(AGENT, "Standups are at 9:30.")
    if state == "archived":
        memory.ws.move_note(note.id, State.ARCHIVED)
    before = store_text(root)
    with pytest.raises(NotRetired, match=f"{note.id} is {state}: .* retire it first"):
        memory.delete(OWNER, note.id)
    assert store_text(root) == before
    fact = memory.save_memory(AGENT, "Fjord", "database", "Postgres")
    with pytest.raises(NotRetired, match="retire it first"):
        memory.delete(OWNER, fact.id)


def test_refusals_change_nothing(root: Path, memory: Memory) -> None:
    note = memory.remember(AGENT, "Standups are at 9:30.")
    memory.retire(AGENT, note.id)
    before = store_text(root)
    with pytest.raises(NotFound, match="no memory has the id 'nte_nope'"):
        memory.delete(OWNER, "nte_nope")
    with pytest.raises(ReadOnly):
        memory.delete(Caller(connection="reader", read_only=True), note.id)
    scoped = memory.remember(AGENT, "Kelp ships on Tuesdays.", scope="project:kelp")
    memory.retire(AGENT, scoped.id)
    before = store_text(root)
    with pytest.raises(NotFound):  # a connection pinned to another scope cannot see it, nor delete it
        memory.delete(Caller(connection="pinned", pinned_scope="project:fjord"), scoped.id)
    assert store_text(root) == before


def test_a_deletion_interrupted_after_its_event_is_finished_on_load(root: Path, clock: Clock) -> None:
    ws = Workspace(root)
    ws.open()
    try:
        memory = Memory(ws, clock=clock)
        note = memory.remember(AGENT, "Half-deleted words: MARMALADE.")
        fact = memory.save_memory(AGENT, "Fjord", "secret", "MARMALADE-2")
        memory.retire(AGENT, note.id)
        memory.retire(AGENT, fact.id)
        # a crash right after the commit point: the delete events are durable, nothing else is done
        for memory_id in (note.id, fact.id):
            now = clock()
            event = Event(f"evt_{memory._ulids.ulid(now)}", "delete", now, memory_id, source=OWNER_SOURCE)
            path = root / "facts" / f"{now:%Y-%m}.md"
            with path.open("a", encoding="utf-8") as handle:
                handle.write(ledger.format_event(event))
        assert "MARMALADE" in store_text(root)
        ws.load()
        assert "MARMALADE" not in store_text(root)
        assert note.id not in ws.notes and fact.id not in ws.facts.records
        assert {note.id, fact.id} <= set(ws.deleted)
    finally:
        ws.close()


def test_erase_blocks_keeps_everything_else_byte_for_byte() -> None:
    head = "# Facts ledger — 2026-03\n\nAppend-only.\n\n"
    keep = "## evt_01M8N16DCB2YF0D3N6WQF1NBY5 store\n\n```yaml\ntime: '2026-03-14T09:00:00Z'\nmemory: fct_a\n"
    keep += "subject: A\npredicate: b\nobject: c\n```\n\n"
    drop = keep.replace("fct_a", "fct_b").replace("NBY5", "NBY6")
    torn = "## evt_01M8N16DCB2YF0D3N6WQF1NBY7 store\n\n```yaml\nmemory: fct_b\n"
    later = drop.replace("NBY6", "NBY9")
    text = head + keep + drop + later + torn
    erased, count = ledger.erase_blocks(text, "fct_b", "evt_01M8N16DCB2YF0D3N6WQF1NBY8")
    assert count == 1 and erased == head + keep + later + torn
