from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from engine.store.model import Note, Source
from engine.store.notefile import OWN_KEYS, format_note, parse_note, split_frontmatter

_CONTROL = "".join(chr(c) for c in [*range(9), 11, 12, *range(14, 32), 127])
body_text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters=_CONTROL), max_size=300)
word = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters=_CONTROL + "\t\n\r"),
    min_size=1,
    max_size=20,
)
times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))


@st.composite
def notes(draw: st.DrawFn) -> Note:
    extra_keys = draw(st.lists(st.from_regex(r"\A[a-z][a-z_]{0,8}\Z"), max_size=3, unique=True))
    return Note(
        id="nte_01M8N16DE4023GQ7VE9X9A8VJT",
        body=draw(body_text),
        created=draw(st.none() | times),
        updated=draw(st.none() | times),
        importance=draw(st.none() | st.floats(0, 1)),
        tags=tuple(draw(st.lists(word, max_size=4, unique=True))),
        scope=draw(st.none() | st.from_regex(r"\A[a-z0-9][a-z0-9:_./-]{0,20}\Z")),
        source=draw(st.none() | st.builds(Source, word, st.booleans())),
        citations=draw(st.none() | st.integers(0, 10_000)),
        last_cited=draw(st.none() | times),
        extra={k: draw(word) for k in extra_keys if k not in OWN_KEYS},
    )


@pytest.mark.req("store:round-trip")
@given(notes())
def test_note_round_trip_is_lossless(note: Note) -> None:
    text = format_note(note)
    again = parse_note(text, "unused")
    assert again == note
    assert format_note(again) == text


@pytest.mark.req("store:note:format")
def test_frontmatter_has_its_keys_and_never_an_empty_one() -> None:
    note = Note(
        id="nte_01M8N16DE4023GQ7VE9X9A8VJT",
        body="Fjord's staging database moved to eu-west-1.",
        created=datetime(2026, 3, 14, 9, 0, tzinfo=UTC),
        importance=0.8,
        tags=("infra",),
        scope="project:fjord",
        source=Source("Claude Code on laptop", verified=True),
    )
    text = format_note(note)
    assert text.startswith(
        "---\nid: nte_01M8N16DE4023GQ7VE9X9A8VJT\ncreated: '2026-03-14T09:00:00.000000Z'\n"
    )
    assert "importance: 0.8\n" in text and "scope: project:fjord\n" in text and "- infra\n" in text
    assert "updated" not in text and "citations" not in text and "last-cited" not in text
    front = yaml.safe_load(text.split("---\n")[1])
    assert all(value not in (None, "", []) for value in front.values())
    assert text.endswith("---\nFjord's staging database moved to eu-west-1.\n")


@pytest.mark.req("store:note:format")
def test_a_file_without_frontmatter_is_all_body() -> None:
    note = parse_note("# My idea\n\nwritten by hand\n", "nte_hand")
    assert note.id == "nte_hand" and note.body == "# My idea\n\nwritten by hand"


@pytest.mark.req("store:bad-file")
@pytest.mark.parametrize(
    "text",
    [
        "---\nid: [unclosed\n---\nbody\n",
        "---\nid: x\nbody never closed\n",
        "---\n- a list\n---\n",
        "---\nimportance: high\n---\nx\n",
    ],
)
def test_unreadable_frontmatter_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_note(text, "nte_x")


def _split_by_lines(text: str) -> tuple[str | None, str]:
    """The frontmatter split as it was first written (every line of the file split apart)."""
    lines = text.split("\n")
    if lines and lines[0].rstrip("\r") == "---":
        for j in range(1, len(lines)):
            if lines[j].rstrip("\r") in ("---", "..."):
                return "\n".join(lines[1:j]), "\n".join(lines[j + 1 :])
        raise ValueError("never closed")
    return None, text


@given(st.lists(st.sampled_from(["---", "...", "---\r", "a: b", "", "\r", "x ---", "body"]), max_size=8))
def test_the_frontmatter_is_split_as_by_lines_without_splitting_the_body(lines: list[str]) -> None:
    for text in ("\n".join(lines), "\n".join(lines) + "\n"):
        try:
            expected: tuple[str | None, str] | None = _split_by_lines(text)
        except ValueError:
            expected = None
        if expected is None:
            with pytest.raises(ValueError, match="never closed"):
                split_frontmatter(text)
        else:
            assert split_frontmatter(text) == expected
