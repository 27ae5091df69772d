from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from engine.store.daylog import day_title, format_entry, parse_daylog, remove_entry
from engine.store.ids import UlidClock
from engine.store.model import LogEntry, Source

_CONTROL = "".join(chr(c) for c in [*range(9), 11, 12, *range(14, 32), 127])
text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters=_CONTROL), min_size=1, max_size=200
)
word = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters=_CONTROL + "\t\n\r"),
    min_size=1,
    max_size=20,
)
_ulids = UlidClock()


@st.composite
def entries(draw: st.DrawFn) -> LogEntry:
    when = draw(
        st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
    )
    words = draw(text).strip("\n").rstrip()  # what remember_note stores
    assume(words.strip())
    return LogEntry(
        id="log_" + _ulids.ulid(when),
        time=when,
        text=words,
        source=draw(st.none() | st.builds(Source, word, st.booleans())),
        scope=draw(st.none() | st.from_regex(r"\A[a-z0-9][a-z0-9:_./-]{0,20}\Z")),
    )


@pytest.mark.req("store:round-trip")
@given(st.lists(entries(), min_size=1, max_size=4))
def test_day_log_round_trip_is_lossless(items: list[LogEntry]) -> None:
    page = day_title(date(2026, 3, 14)) + "".join(format_entry(e) for e in items)
    parsed, problems = parse_daylog(page)
    assert problems == []
    assert parsed == items


@pytest.mark.req("store:bad-file")
def test_a_bad_entry_is_skipped_and_the_rest_read() -> None:
    when = datetime(2026, 3, 14, 9, tzinfo=UTC)
    good = LogEntry("log_" + _ulids.ulid(when), when, "kept")
    page = day_title(when.date()) + "- nonsense header\n  x\n\n" + format_entry(good) + "stray line\n"
    parsed, problems = parse_daylog(page)
    assert parsed == [good]
    assert [p.line for p in problems] == [3, 9]


def test_remove_entry_takes_out_exactly_one_entry() -> None:
    when = datetime(2026, 3, 14, 9, tzinfo=UTC)
    a, b, c = (LogEntry("log_" + _ulids.ulid(when), when, f"{n}\n\n  indented\n- dash") for n in "abc")
    page = day_title(when.date()) + format_entry(a) + format_entry(b) + format_entry(c)
    parsed, problems = parse_daylog(remove_entry(page, b.id))
    assert parsed == [a, c] and problems == []
