"""The write, read and retire rules, on a real workspace directory (the MCP layer is tested apart)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.errors import BadScope, Forbidden, InvalidInput, NotFound, ReadOnly, TooLong
from engine.memory import Memory
from engine.scope import Caller
from engine.store.workspace import Workspace
from tests.engine.conftest import Clock
from tests.engine.support import snapshot

ME = Caller(client_name="test-client")


def ledger_text(root: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted((root / "facts").glob("*.md")))


@pytest.mark.req("write:remember")
def test_remember_without_a_triple_saves_a_note_kept_whole(root: Path, memory: Memory) -> None:
    words = "Deploys go out on Tuesdays.\n\n  Never on Fridays — ask Mia first."
    receipt = memory.remember(ME, words, tags=["ops"], importance=0.9, scope="project:fjord")
    assert (receipt.action, receipt.kind) == ("store", "note")
    text = (root / receipt.path).read_text(encoding="utf-8")  # type: ignore[operator]
    assert text.endswith(f"---\n{words}\n")
    got = memory.retrieve(ME, memory_id=receipt.id).notes[0]
    assert (got.text, got.tags, got.importance, got.scope) == (words, ["ops"], 0.9, "project:fjord")


@pytest.mark.req("write:remember")
def test_remember_with_a_triple_saves_a_fact_with_its_statement(memory: Memory) -> None:
    receipt = memory.remember(ME, "Fjord runs on Postgres 16.", "Fjord", "database", "Postgres 16")
    assert (receipt.action, receipt.kind) == ("store", "fact")
    fact = memory.retrieve(ME, subject="fjord").facts[0]
    assert (fact.object, fact.statement, fact.current) == ("Postgres 16", "Fjord runs on Postgres 16.", True)


@pytest.mark.req("write:remember")
@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"statement": "x" * 4001}, TooLong, "4,001 characters"),
        ({"statement": "bell\x07"}, InvalidInput, r"U\+0007"),
        ({"statement": ""}, InvalidInput, "empty"),
        ({"statement": "half", "subject": "Fjord"}, InvalidInput, "missing: predicate, object"),
        ({"statement": "half", "subject": "Fjord", "object": "x"}, InvalidInput, "missing: predicate"),
        ({"statement": "s", "subject": "a\nb", "predicate": "p", "object": "o"}, InvalidInput, "single line"),
        ({"statement": "s", "scope": "Bad Scope"}, BadScope, "lowercase"),
        ({"statement": "s", "importance": 2.0}, InvalidInput, "importance"),
        ({"statement": "s", "tags": ["ok", ""]}, InvalidInput, "tag"),
    ],
)
def test_refusals_say_what_to_fix_and_write_nothing(
    root: Path, memory: Memory, kwargs: dict[str, object], error: type[Exception], words: str
) -> None:
    memory.remember(ME, "something already here")
    before = snapshot(root)
    with pytest.raises(error, match=words):
        memory.remember(ME, **kwargs)  # type: ignore[arg-type]
    assert snapshot(root) == before


@pytest.mark.req("write:save-memory")
def test_save_memory_is_the_fact_form(memory: Memory, root: Path) -> None:
    receipt = memory.save_memory(ME, "Mia", "role", "release manager")
    assert (receipt.action, receipt.kind) == ("store", "fact")
    assert "object: release manager" in ledger_text(root)
    with pytest.raises(InvalidInput, match="object is empty"):
        memory.save_memory(ME, "Mia", "role", "  ")


@pytest.mark.req("write:remember-note")
def test_remember_note_appends_a_timestamped_line_to_the_days_log(
    root: Path, memory: Memory, clock: Clock
) -> None:
    first = memory.remember_note(ME, "standup: shipped search")
    clock.set(datetime(2026, 3, 14, 17, 30, tzinfo=UTC))
    memory.remember_note(ME, "retro done")
    back = memory.remember_note(ME, "filed late", date="2026-03-01")
    page = (root / "logs/2026/03/14.md").read_text(encoding="utf-8")
    assert page.startswith("# Log — 2026-03-14\n")
    assert page.index("standup: shipped search") < page.index("retro done")
    assert "- 2026-03-14T17:30:00.001000Z log_" in page
    assert back.path == "logs/2026/03/01.md" and "filed late" in (root / back.path).read_text(
        encoding="utf-8"
    )
    assert first.kind == "log" and first.event_id == "evt_" + first.id.removeprefix("log_")
    with pytest.raises(InvalidInput, match="YYYY-MM-DD"):
        memory.remember_note(ME, "x", date="March 1st")


@pytest.mark.req("write:receipt")
def test_receipts_carry_action_event_id_memory_id_kind_and_closed_value(memory: Memory) -> None:
    stored = memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")
    assert stored.event_id and stored.event_id.startswith("evt_") and stored.closed is None
    replaced = memory.remember(ME, "Fjord moved to SQLite", "Fjord", "database", "SQLite")
    assert (
        replaced.action == "supersede" and replaced.id == stored.id and replaced.event_id != stored.event_id
    )
    assert replaced.closed is not None
    assert (replaced.closed.object, replaced.closed.event_id) == ("Postgres", stored.event_id)
    assert replaced.closed.valid_to > replaced.closed.valid_from


@pytest.mark.req("write:idempotent")
def test_saving_the_same_fact_or_note_again_changes_nothing(root: Path, memory: Memory) -> None:
    fact = memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")
    note = memory.remember(ME, "Release train leaves Thursdays", scope="project:fjord")
    before = snapshot(root)
    again = memory.remember(ME, "Fjord uses Postgres", " fjord ", "DATABASE", "postgres")
    note_again = memory.remember(ME, "Release train leaves Thursdays", scope="project:fjord")
    assert (again.action, again.event_id, again.id) == ("nochange", fact.event_id, fact.id)
    assert (note_again.action, note_again.id) == ("nochange", note.id)
    assert snapshot(root) == before
    other_scope = memory.remember(ME, "Release train leaves Thursdays")
    assert other_scope.action == "store" and other_scope.id != note.id


@pytest.mark.req("write:supersede")
def test_a_new_value_closes_the_old_one_and_going_back_works(root: Path, memory: Memory) -> None:
    a = memory.remember(ME, "db is Postgres", "Fjord", "database", "Postgres")
    b = memory.remember(ME, "db is SQLite", "FJORD", "Database ", "SQLite")
    c = memory.remember(ME, "back to Postgres", "fjord", "database", "Postgres")
    assert [r.action for r in (a, b, c)] == ["store", "supersede", "supersede"]
    history = memory.retrieve(ME, subject="Fjord", include_history=True).facts
    assert [(f.object, f.current) for f in history] == [
        ("Postgres", True),
        ("SQLite", False),
        ("Postgres", False),
    ]
    assert history[1].valid_to == history[0].valid_from and history[2].valid_to == history[1].valid_from
    assert history[1].subject == "FJORD"  # the original spelling is kept for display
    assert ledger_text(root).count(" supersede\n") == 2


@pytest.mark.req("write:possible-duplicates")
def test_near_duplicate_subjects_and_other_scopes_are_warned_about(root: Path, memory: Memory) -> None:
    memory.remember(ME, "Fjord app uses Svelte", "Fjord app", "frontend", "Svelte")
    memory.remember(ME, "in project scope", "Fjord", "frontend", "React", scope="project:fjord")
    receipt = memory.remember(ME, "Fjord uses Svelte", "Fjord", "frontend", "Svelte")
    whys = sorted(d.why for d in receipt.possible_duplicates)
    assert len(whys) == 2
    assert any("one word longer or shorter" in w for w in whys)
    assert any("in scope project:fjord" in w for w in whys)
    assert receipt.action == "store"  # a warning changes nothing on its own
    assert not memory.remember(ME, "unrelated", "Kelp", "frontend", "Vue").possible_duplicates


@pytest.mark.req("write:source")
def test_source_is_the_connection_name_or_a_self_reported_label(memory: Memory) -> None:
    vouched = Caller(connection="Claude Code on laptop", client_name="claude-code")
    r1 = memory.remember(vouched, "a", source="I am someone else")
    r2 = memory.remember(Caller(client_name="cursor"), "b")
    r3 = memory.remember(Caller(client_name="cursor"), "c", source="nightly agent")
    r4 = memory.remember(Caller(), "d")
    assert (r1.source, r1.source_verified) == ("Claude Code on laptop", True)
    assert (r2.source, r2.source_verified) == ("cursor", False)
    assert (r3.source, r3.source_verified) == ("nightly agent", False)
    assert (r4.source, r4.source_verified) == ("unknown client", False)
    stored = memory.retrieve(vouched, memory_id=r1.id).notes[0]
    assert (stored.source, stored.source_verified) == ("Claude Code on laptop", True)
    with pytest.raises(TooLong):  # unused behind a named connection, yet a bad argument is refused
        memory.remember(vouched, "e", source="x" * 201)
    with pytest.raises(InvalidInput, match="single line"):
        memory.remember_note(vouched, "f", source="two\nlines")


@pytest.mark.req("recall:retrieve-memory")
def test_retrieve_refuses_a_subject_or_predicate_no_fact_can_have(memory: Memory) -> None:
    with pytest.raises(TooLong, match="subject is 201 characters"):
        memory.retrieve(ME, subject="s" * 201)
    with pytest.raises(TooLong, match="predicate is 201 characters"):
        memory.retrieve(ME, predicate="p" * 201)
    assert memory.retrieve(ME, subject="s" * 200).facts == []


@pytest.mark.req("write:scope")
def test_scopes_are_validated_and_kept(memory: Memory) -> None:
    receipt = memory.remember(ME, "scoped", "Fjord", "owner", "Mia", scope="project:fjord")
    assert receipt.scope == "project:fjord"
    for bad in ("../../etc", "UPPER", "a..b"):
        with pytest.raises(BadScope):
            memory.remember(ME, "x", scope=bad)


@pytest.mark.req("engine:identity")
def test_read_only_callers_cannot_write_anything(root: Path, memory: Memory) -> None:
    note = memory.remember(ME, "existing")
    reader = Caller(connection="dashboard", read_only=True)
    before = snapshot(root)
    attempts: list[Callable[[], object]] = [
        lambda: memory.remember(reader, "x"),
        lambda: memory.save_memory(reader, "s", "p", "o"),
        lambda: memory.remember_note(reader, "x"),
        lambda: memory.retire(reader, note.id),
        lambda: memory.restore(reader, note.id),
    ]
    for attempt in attempts:
        with pytest.raises(ReadOnly, match="read-only"):
            attempt()
    assert snapshot(root) == before
    assert memory.retrieve(reader, memory_id=note.id).notes[0].text == "existing"


@pytest.mark.req("engine:identity", "gw:isolation")
@pytest.mark.parametrize("unscoped", [False, True], ids=["scope-only", "scope-and-unscoped"])
def test_a_pinned_connection_writes_in_its_scope_and_reads_unscoped_only_if_chosen(
    memory: Memory, unscoped: bool
) -> None:
    pinned = Caller(connection="fjord bot", pinned_scope="project:fjord", reads_unscoped=unscoped)
    other = memory.remember(ME, "kelp secret", "Kelp", "db", "MySQL", scope="project:kelp")
    shared = memory.remember(ME, "everyone", "Org", "name", "Acme")
    shared_note = memory.remember(ME, "an unscoped note")
    mine = memory.remember(pinned, "fjord db", "Fjord", "db", "Postgres")
    log = memory.remember_note(pinned, "pinned log")
    assert mine.scope == "project:fjord" and log.scope == "project:fjord"
    with pytest.raises(Forbidden, match="pinned to scope 'project:fjord'"):
        memory.remember(pinned, "x", scope="project:kelp")
    ids = {f.id for f in memory.retrieve(pinned, predicate="db").facts}
    assert ids == {mine.id}
    assert [f.id for f in memory.retrieve(pinned, subject="Org").facts] == ([shared.id] if unscoped else [])
    with pytest.raises(NotFound):
        memory.retrieve(pinned, memory_id=other.id)
    with pytest.raises(NotFound):
        memory.retire(pinned, other.id)
    with pytest.raises(Forbidden):
        memory.retrieve(pinned, subject="Kelp", scope="project:kelp")
    for memory_id in (shared.id, shared_note.id):
        if unscoped:
            assert (
                memory.retrieve(pinned, memory_id=memory_id).facts
                or memory.retrieve(pinned, memory_id=memory_id).notes
            )
            with pytest.raises(Forbidden, match="only memories of that scope"):
                memory.retire(pinned, memory_id)
        else:
            with pytest.raises(NotFound):
                memory.retrieve(pinned, memory_id=memory_id)
            with pytest.raises(NotFound):
                memory.retire(pinned, memory_id)
    memory.retire(ME, shared_note.id)  # the owner retires it; the pinned connection cannot restore it
    with pytest.raises(Forbidden if unscoped else NotFound):
        memory.restore(pinned, shared_note.id)
    assert memory.retrieve(ME, memory_id=shared.id).facts[0].current
    assert memory.retrieve(ME, memory_id=shared_note.id).notes[0].state == "retired"
    assert memory.retire(pinned, mine.id).action == "retire"  # its own scope: allowed
    assert memory.restore(pinned, mine.id).action == "restore"


@pytest.mark.req("recall:retrieve-memory")
def test_as_of_returns_what_was_current_then(memory: Memory, clock: Clock) -> None:
    clock.set(datetime(2026, 1, 10, 12, tzinfo=UTC))
    memory.remember(ME, "v1", "Fjord", "version", "1.0")
    clock.set(datetime(2026, 2, 20, 8, tzinfo=UTC))
    memory.remember(ME, "v2", "Fjord", "version", "2.0")
    clock.set(datetime(2026, 2, 20, 23, 59, tzinfo=UTC))
    memory.remember(ME, "v3", "Fjord", "version", "3.0")

    def at(when: str) -> list[str]:
        return [f.object for f in memory.retrieve(ME, subject="Fjord", as_of=when).facts]

    assert at("2026-01-09") == []
    assert at("2026-01-10") == ["1.0"]  # a bare date is the end of that day, UTC
    assert at("2026-02-20T07:59:59Z") == ["1.0"]
    assert at("2026-02-20T10:00:01+02:00") == ["2.0"]  # 08:00:01 UTC
    assert at("2026-02-20") == ["3.0"]
    assert [f.object for f in memory.retrieve(ME, subject="Fjord").facts] == ["3.0"]
    with pytest.raises(InvalidInput, match="ISO 8601"):
        at("last tuesday")


@pytest.mark.req("recall:retrieve-memory")
def test_retrieve_by_id_finds_facts_notes_and_log_entries(memory: Memory) -> None:
    fact = memory.remember(ME, "v", "Fjord", "version", "1")
    note = memory.remember(ME, "a note")
    log = memory.remember_note(ME, "a log line")
    assert memory.retrieve(ME, memory_id=fact.id).facts[0].object == "1"
    assert memory.retrieve(ME, memory_id=note.id).notes[0].kind == "note"
    got = memory.retrieve(ME, memory_id=log.id).notes[0]
    assert (got.kind, got.text) == ("log", "a log line")
    with pytest.raises(NotFound, match="nte_nope"):
        memory.retrieve(ME, memory_id="nte_nope")
    with pytest.raises(InvalidInput, match="subject, a predicate, or an id"):
        memory.retrieve(ME)


@pytest.mark.req("life:retire")
def test_retire_and_restore_a_note_exactly(root: Path, memory: Memory) -> None:
    note = memory.remember(ME, "kelp is the staging host", tags=["infra"], importance=0.4)
    path = root / note.path  # type: ignore[operator]
    original = path.read_bytes()
    retired = memory.retire(ME, note.id, reason="host renamed")
    assert retired.action == "retire" and not path.exists()
    assert (root / "retired" / note.path).read_bytes() == original  # type: ignore[operator]
    assert memory.retrieve(ME, memory_id=note.id).notes[0].state == "retired"
    assert memory.retire(ME, note.id).action == "nochange"
    restored = memory.restore(ME, note.id)
    assert restored.action == "restore" and path.read_bytes() == original
    assert "reason: host renamed" in ledger_text(root)


@pytest.mark.req("life:retire")
def test_retire_and_restore_a_fact_keeps_its_history(memory: Memory, root: Path) -> None:
    memory.remember(ME, "v1", "Fjord", "version", "1")
    fact = memory.remember(ME, "v2", "Fjord", "version", "2")
    before = memory.retrieve(ME, memory_id=fact.id, include_history=True).facts
    memory.retire(ME, fact.id, reason="wrong project")
    assert memory.retrieve(ME, subject="Fjord").facts == []
    assert memory.retrieve(ME, memory_id=fact.id).facts[0].state == "retired"
    memory.restore(ME, fact.id)
    assert memory.retrieve(ME, memory_id=fact.id, include_history=True).facts == before
    text = ledger_text(root)
    assert " retire\n" in text and " restore\n" in text  # the retired fact stays in the ledger


@pytest.mark.req("life:retire")
def test_retire_and_restore_a_log_entry_exactly(root: Path, memory: Memory) -> None:
    keep = memory.remember_note(ME, "first")
    entry = memory.remember_note(ME, "second\n  with detail")
    live = root / "logs/2026/03/14.md"
    original = memory.retrieve(ME, memory_id=entry.id).notes[0]
    memory.retire(ME, entry.id)
    assert "second" not in live.read_text(encoding="utf-8") and "first" in live.read_text(encoding="utf-8")
    assert "second" in (root / "retired/logs/2026/03/14.md").read_text(encoding="utf-8")
    memory.restore(ME, entry.id)
    back = memory.retrieve(ME, memory_id=entry.id).notes[0]
    assert back == original
    assert memory.retrieve(ME, memory_id=keep.id).notes[0].state == "live"


@pytest.mark.req("store:ledger:append-only")
def test_the_ledger_only_ever_grows(root: Path, memory: Memory) -> None:
    seen = ""
    fact = None
    for n in range(4):
        fact = memory.remember(ME, f"v{n}", "Fjord", "version", str(n))
        text = ledger_text(root)
        assert text.startswith(seen) and len(text) > len(seen)
        seen = text
    assert fact is not None
    fact_id = fact.id
    steps: list[Callable[[], object]] = [
        lambda: memory.retire(ME, fact_id),
        lambda: memory.restore(ME, fact_id),
    ]
    for step in steps:
        step()
        text = ledger_text(root)
        assert text.startswith(seen) and len(text) > len(seen)
        seen = text


@pytest.mark.req("store:ledger:append-only")
def test_valid_to_is_derivable_from_the_ledger_alone(
    root: Path, memory: Memory, workspace: Workspace
) -> None:
    memory.remember(ME, "v1", "Fjord", "version", "1")
    memory.remember(ME, "v2", "Fjord", "version", "2")
    expected = memory.retrieve(ME, subject="Fjord", include_history=True)
    workspace.close()
    only_ledger = root.parent / "only-ledger"
    (only_ledger / "facts").mkdir(parents=True)
    for path in (root / "facts").iterdir():
        (only_ledger / "facts" / path.name).write_bytes(path.read_bytes())
    fresh = Workspace(only_ledger)
    fresh.open()
    try:
        assert Memory(fresh).retrieve(ME, subject="Fjord", include_history=True) == expected
    finally:
        fresh.close()
        workspace.open()


@pytest.mark.req("recall:retrieve-memory", "rel:load")
def test_retrieve_answers_while_a_write_holds_the_write_lock_through_its_fsync(memory: Memory) -> None:
    """A write holds the workspace's write lock from its first byte to its last fsync; a
    ``retrieve_memory`` does not wait for it. The write it overlaps is seen whole or not at all."""
    fact = memory.remember(ME, "Fjord runs on Postgres 16.", "Fjord", "database", "Postgres 16")
    held, release, answered = threading.Event(), threading.Event(), threading.Event()
    found: list[object] = []

    def writer_in_its_fsync() -> None:
        with memory.ws.lock:  # what a write holds while its bytes reach the disk
            held.set()
            release.wait(60)

    def reader() -> None:
        found.append(memory.retrieve(ME, memory_id=fact.id).facts[0].object)
        answered.set()

    writing = threading.Thread(target=writer_in_its_fsync)
    writing.start()
    try:
        assert held.wait(60)
        reading = threading.Thread(target=reader)
        reading.start()
        assert answered.wait(30), "retrieve_memory waited for the write lock"
        assert found == ["Postgres 16"]
    finally:
        release.set()
        writing.join(60)
    reading.join(60)
    # and a real write after it is seen at once, whole
    memory.remember(ME, "Fjord runs on Postgres 17.", "Fjord", "database", "Postgres 17")
    assert memory.retrieve(ME, memory_id=fact.id).facts[0].object == "Postgres 17"
