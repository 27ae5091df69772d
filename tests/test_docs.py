"""The documentation matches what the code writes: its examples parse and round-trip exactly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.store.daylog import day_title, format_entry, parse_daylog
from engine.store.ledger import format_event, parse_ledger
from engine.store.notefile import format_note, parse_note
from gateway.auth.passwords import MAX_PASSWORD, MIN_PASSWORD

DOCS = Path(__file__).parent.parent / "docs"


def examples(kind: str) -> list[str]:
    text = (DOCS / "store-format.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- example: (\w+) -->\n````markdown\n(.*?)\n````\n", text, flags=re.S)
    return [body + "\n" for name, body in found if name == kind]


@pytest.mark.req("store:round-trip")
@pytest.mark.req("store:ledger:append-only")
def test_the_ledger_example_parses_and_round_trips() -> None:
    (text,) = examples("ledger")
    parsed = parse_ledger(text)
    assert parsed.problems == () and [e.kind for e in parsed.events] == ["store", "supersede", "retire"]
    assert "".join(format_event(e) for e in parsed.events) == text


@pytest.mark.req("store:note:format")
def test_the_note_example_parses_and_round_trips() -> None:
    (text,) = examples("note")
    note = parse_note(text, "unused")
    assert note.id == "nte_01M8N16DE4023GQ7VE9X9A8VJT" and note.tags == ("infra", "staging")
    assert format_note(note) == text


@pytest.mark.req("store:round-trip")
def test_the_day_log_example_parses_and_round_trips() -> None:
    (text,) = examples("daylog")
    entries, problems = parse_daylog(text)
    assert problems == [] and len(entries) == 2
    assert day_title(entries[0].time.date()) + "".join(format_entry(e) for e in entries) == text


@pytest.mark.req("life:delete")
def test_the_delete_example_parses_round_trips_and_says_nothing_of_the_memory() -> None:
    (text,) = examples("delete")
    parsed = parse_ledger(text)
    assert parsed.problems == () and [e.kind for e in parsed.events] == ["delete"]
    (event,) = parsed.events
    said = (event.subject, event.predicate, event.object, event.statement, event.reason, event.scope)
    assert said == (None,) * 6 and event.source is not None and event.source.verified
    assert "".join(format_event(e) for e in parsed.events) == text


@pytest.mark.req("gw:signin")
def test_the_accounts_page_states_the_password_rules_the_code_enforces() -> None:
    text = (DOCS / "accounts.md").read_text(encoding="utf-8")
    assert f"**at least {MIN_PASSWORD} and at most {MAX_PASSWORD:,} characters**" in text
