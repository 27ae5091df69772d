from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.store.ids import UlidClock
from engine.store.ledger import format_event, parse_ledger
from engine.store.model import EVENT_KINDS, Event, Source

_CONTROL = "".join(chr(c) for c in [*range(9), 11, 12, *range(14, 32), 127])
line_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters=_CONTROL + "\t\n\r"),
    min_size=1,
    max_size=40,
)
free_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters=_CONTROL), min_size=1, max_size=200
)
times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
_ulids = UlidClock()


@st.composite
def events(draw: st.DrawFn) -> Event:
    kind = draw(st.sampled_from(EVENT_KINDS))
    when = draw(times)
    valued = kind in ("store", "supersede")
    return Event(
        event_id="evt_" + _ulids.ulid(when),
        kind=kind,
        time=when,
        memory=draw(st.sampled_from(["fct_0123456789abcdef0123", "nte_01M8N16DE4023GQ7VE9X9A8VJT"])),
        subject=draw(line_text) if valued else draw(st.none() | line_text),
        predicate=draw(line_text) if valued else draw(st.none() | line_text),
        object=draw(line_text) if valued else draw(st.none() | line_text),
        scope=draw(st.none() | st.from_regex(r"\A[a-z0-9][a-z0-9:_./-]{0,20}\Z")),
        statement=draw(st.none() | free_text),
        source=draw(st.none() | st.builds(Source, line_text, st.booleans())),
        closes=draw(st.none() | st.just("evt_01M8N16DCB2YF0D3N6WQF1NBY5")),
        reason=draw(st.none() | free_text),
    )


@pytest.mark.req("store:round-trip")
@given(st.lists(events(), max_size=5))
def test_ledger_round_trip_is_lossless(evs: list[Event]) -> None:
    text = "# header\n\n" + "".join(format_event(e) for e in evs)
    parsed = parse_ledger(text)
    assert parsed.problems == ()
    assert parsed.events == tuple(evs)
    assert "".join(format_event(e) for e in parsed.events) == text.removeprefix("# header\n\n")


def _event(n: int) -> Event:
    when = datetime(2026, 3, 14, 9, n, tzinfo=UTC)
    return Event("evt_" + _ulids.ulid(when), "store", when, "fct_x", "s", "p", f"o{n}", statement=f"s p o{n}")


@pytest.mark.req("store:torn-tail")
@pytest.mark.parametrize("cut", [1, 3, 10, 40, -5, -3])
def test_a_torn_last_block_is_reported_and_ignored(cut: int) -> None:
    whole = format_event(_event(1)) + format_event(_event(2))
    last = format_event(_event(3))
    parsed = parse_ledger(whole + last[:cut])
    assert [e.object for e in parsed.events] == ["o1", "o2"]
    assert len(parsed.problems) == 1 and parsed.problems[0].torn


@pytest.mark.req("store:torn-tail")
@pytest.mark.parametrize("cut", [-1, -2])
def test_a_block_missing_only_its_trailing_blank_lines_is_whole(cut: int) -> None:
    text = format_event(_event(1)) + format_event(_event(2))[:cut]
    parsed = parse_ledger(text)
    assert [e.object for e in parsed.events] == ["o1", "o2"] and parsed.problems == ()


@pytest.mark.req("store:bad-file")
def test_a_mangled_block_in_the_middle_is_skipped_not_fatal() -> None:
    good1, good2 = format_event(_event(1)), format_event(_event(2))
    bad = "## evt_NOT_AN_ID store\n\n```yaml\ntime: x\n```\n\n"
    parsed = parse_ledger(good1 + bad + good2)
    assert [e.object for e in parsed.events] == ["o1", "o2"]
    assert len(parsed.problems) == 1 and not parsed.problems[0].torn


@pytest.mark.req("store:ledger:append-only")
def test_event_ids_are_unique_and_time_sortable() -> None:
    clock = UlidClock()
    moments = [datetime(2026, 3, 14, 9, 0, tzinfo=UTC)] * 50 + [datetime(2026, 3, 14, 9, 1, tzinfo=UTC)] * 5
    made = [clock.ulid(m) for m in moments]
    assert len(set(made)) == len(made)
    assert made == sorted(made)
