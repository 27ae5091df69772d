"""The YAML memo (``.cache/store-yaml.json``): a start parses only blocks it has not seen, and the
memo can never answer for a block that changed — it is keyed by the block's exact text."""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from engine.memory import Memory
from engine.scope import Caller
from engine.store import _yaml
from engine.store.fsio import md_files
from engine.store.layout import CACHE, MEMO_NAME
from engine.store.workspace import Workspace
from engine.store.yamlmemo import LOADER, YamlMemo, decode, encode, same

ME = Caller(client_name="test")

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.dates()
    | st.datetimes(
        timezones=st.none()
        | st.just(UTC)
        | st.builds(timezone, st.sampled_from([timedelta(hours=2), timedelta(hours=-5, minutes=-30)]))
    )
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(values)
def test_what_is_kept_comes_back_equal_in_value_and_type(value: Any) -> None:
    data = encode(value)
    back = decode(json.loads(json.dumps(data)))
    assert same(back, value)


@given(values)
def test_a_memo_answers_exactly_as_the_parser_does(value: Any) -> None:
    text = yaml.safe_dump({"k": value}, allow_unicode=True)
    memo = YamlMemo(None)
    first = memo.load(text)
    again = memo.load(text)  # from the memo when kept
    assert same(first, _yaml.load(text)) and same(again, first)


def test_values_that_would_not_survive_are_never_kept() -> None:
    assert not same(1, 1.0) and not same(1, True) and not same([1], [1.0])
    assert not same(datetime(2026, 1, 1), datetime(2026, 1, 1, tzinfo=UTC))
    memo = YamlMemo(None)
    for text in ("a: .nan", "a: !!binary aGVsbG8=", "a: !!set {x, y}"):
        memo.load(text)
    assert memo._used == {}
    assert math.isnan(memo.load("a: .nan")["a"])  # parsed afresh, still right
    assert memo.parsed == 4


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    ws = Workspace(tmp_path)
    ws.open()
    try:
        memory = Memory(ws)
        memory.remember(ME, "the staging box is called kelp", tags=["infra"], scope="project:kelp")
        memory.remember(ME, "Fjord's frontend is written in Svelte")
        memory.remember(ME, "Fjord uses Postgres", "Fjord", "database", "Postgres")
    finally:
        ws.close()
    return tmp_path


def reopened(root: Path) -> Workspace:
    ws = Workspace(root)
    ws.open()
    ws.close()
    return ws


def parsed_notes(ws: Workspace) -> dict[str, str]:
    return {k: repr(v) for k, v in ws.notes.items()} | {k: repr(v) for k, v in ws.facts.records.items()}


@pytest.mark.req("perf:cold-start")
def test_a_second_start_parses_no_yaml_and_reads_the_same_memories(filled: Path) -> None:
    first = reopened(filled)  # the start that writes the memo
    memo_file = filled / CACHE / MEMO_NAME
    assert memo_file.is_file() and first.yaml_parsed >= 3
    second = reopened(filled)
    assert second.yaml_parsed == 0
    assert parsed_notes(second) == parsed_notes(first)
    mtime = memo_file.stat().st_mtime_ns
    reopened(filled)
    assert memo_file.stat().st_mtime_ns == mtime  # nothing new: not rewritten


@pytest.mark.req("store:hand-edits")
def test_a_hand_edit_that_keeps_size_and_time_is_still_read(filled: Path) -> None:
    reopened(filled)
    path = next(p for p in md_files(filled / "notes") if "kelp" in p.read_text())
    stat = path.stat()
    text = path.read_text()
    edited = text.replace("scope: project:kelp", "scope: project:kelq")
    assert edited != text and len(edited) == len(text)
    path.write_text(edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    ws = reopened(filled)
    assert ws.yaml_parsed == 1
    assert {r.note.scope for r in ws.notes.values()} == {"project:kelq", None}


def test_a_damaged_or_foreign_memo_is_ignored_and_rewritten(filled: Path) -> None:
    expected = parsed_notes(reopened(filled))
    memo_file = filled / CACHE / MEMO_NAME
    for damaged in (b"{not json", b'{"format": 1, "loader": "another", "blocks": {}}', b"[]"):
        memo_file.write_bytes(damaged)
        ws = reopened(filled)
        assert parsed_notes(ws) == expected and ws.yaml_parsed >= 3
        assert json.loads(memo_file.read_bytes())["loader"] == LOADER
    memo_file.unlink()
    assert parsed_notes(reopened(filled)) == expected


def test_a_memo_that_cannot_be_written_changes_nothing(filled: Path) -> None:
    expected = parsed_notes(reopened(filled))
    (filled / CACHE / MEMO_NAME).unlink()
    (filled / CACHE).rmdir()
    (filled / CACHE).write_text("a file where the folder would be")
    assert parsed_notes(reopened(filled)) == expected


def test_md_files_lists_what_a_recursive_glob_lists_in_the_same_order(tmp_path: Path) -> None:
    for rel in (
        "b.md",
        "a/z.md",
        "a/b/c.md",
        "a-b/x.md",
        "A/y.md",
        ".hidden.md",
        "a/.h/k.md",
        "n.txt",
        "d.md/e.md",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "linked").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "link.md").symlink_to(tmp_path / "b.md")
    (tmp_path / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    glob = [p for p in sorted(tmp_path.rglob("*.md")) if not p.name.startswith(".") and p.is_file()]
    assert md_files(tmp_path) == glob
    assert md_files(tmp_path / "absent") == []


def test_the_memo_holds_dates_and_times_as_the_parser_made_them() -> None:
    memo = YamlMemo(None)
    text = "when: 2026-05-08\nat: 2026-05-08T10:00:00+02:00\nplain: 2026-05-08 10:00:00"
    got = memo.load(text)
    assert isinstance(got["when"], date) and got["at"].utcoffset() == timedelta(hours=2)
    kept = YamlMemo(None, json.loads(json.dumps(memo._used)))
    assert same(kept.load(text), got) and kept.parsed == 0
