from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from engine.errors import BadDate, BadScope, InvalidInput, TooLong
from engine.store.text import (
    MAX_STATEMENT,
    check_importance,
    check_scope,
    check_tags,
    check_text,
    normalize_key,
    parse_day,
    parse_when,
)


@pytest.mark.req("write:remember")
def test_statement_limit_is_refused_never_cut() -> None:
    assert check_text("statement", "x" * MAX_STATEMENT) == "x" * MAX_STATEMENT
    with pytest.raises(TooLong, match="4,001 characters; the limit is 4,000"):
        check_text("statement", "x" * (MAX_STATEMENT + 1))


@pytest.mark.req("write:remember")
@pytest.mark.parametrize("bad", ["\x00", "\x07", "\x0b", "\x1b", "\x1f", "\x7f"])
def test_control_characters_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInput, match=f"U\\+{ord(bad):04X}"):
        check_text("statement", f"before{bad}after")


@pytest.mark.req("write:remember")
def test_tab_newline_and_carriage_return_are_allowed() -> None:
    assert check_text("statement", "a\tb\nc\r\nd") == "a\tb\nc\r\nd"


@pytest.mark.req("write:remember")
@pytest.mark.parametrize("empty", ["", "   ", "\n\t"])
def test_empty_text_is_refused(empty: str) -> None:
    with pytest.raises(InvalidInput, match="empty"):
        check_text("statement", empty)


@pytest.mark.req("write:supersede")
def test_keys_compare_after_nfc_trim_collapse_and_casefold() -> None:
    assert normalize_key("  Zu\u0308rich   Office ") == normalize_key("zürich office")
    assert normalize_key("STRASSE") == normalize_key("straße")
    assert normalize_key("Fjord") != normalize_key("Fjord app")


@pytest.mark.req("write:scope")
@pytest.mark.parametrize("good", ["project:fjord", "a", "team/x.y_z-1", "0" * 64])
def test_good_scopes_pass(good: str) -> None:
    assert check_scope(good) == good


@pytest.mark.req("write:scope")
@pytest.mark.req("sec:authz")
@pytest.mark.parametrize("bad", ["", "Project", "-x", "a..b", "../etc", "a b", "x" * 65, "é", "/abs"])
def test_bad_scopes_are_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(BadScope, match="lowercase a-z"):
        check_scope(bad)


def test_tags_are_checked_trimmed_and_deduplicated() -> None:
    assert check_tags([" a ", "a", "b"]) == ("a", "b")
    with pytest.raises(InvalidInput):
        check_tags(["a\nb"])
    with pytest.raises(InvalidInput, match="at most 20"):
        check_tags([str(i) for i in range(21)])


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), True])
def test_importance_out_of_range_is_refused(bad: float) -> None:
    with pytest.raises(InvalidInput, match="importance"):
        check_importance(bad)


@pytest.mark.req("recall:retrieve-memory")
def test_as_of_bare_date_is_end_of_that_day_utc() -> None:
    assert parse_when("2026-03-14") == datetime.combine(datetime(2026, 3, 14).date(), time.max, tzinfo=UTC)


@pytest.mark.req("recall:retrieve-memory")
def test_as_of_datetimes_are_timezone_aware() -> None:
    assert parse_when("2026-03-14T10:00:00+02:00") == datetime(2026, 3, 14, 8, tzinfo=UTC)
    assert parse_when("2026-03-14T10:00:00Z") == datetime(2026, 3, 14, 10, tzinfo=UTC)
    assert parse_when("2026-03-14T10:00:00") == datetime(2026, 3, 14, 10, tzinfo=UTC)


@pytest.mark.req("recall:retrieve-memory")
@pytest.mark.parametrize("bad", ["", "yesterday", "2026-13-01", "14/03/2026"])
def test_bad_dates_are_refused_with_an_example(bad: str) -> None:
    with pytest.raises(BadDate, match="2026-11-30"):
        parse_when(bad)
    with pytest.raises(BadDate):
        parse_day(bad)
