"""Names and days written in a memory's words (engine.index.mentions), pure."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from engine.index import docs
from engine.index.mentions import names, stated_day, subject, written_days

WRITTEN = datetime(2024, 3, 6, 9, 30, tzinfo=UTC)  # a Wednesday


@pytest.mark.req("quality:layouts")
@pytest.mark.parametrize(
    "text",
    [
        "Priya: I baked a lemon tart for Tomás.",
        "2024-03-02 Priya: I baked a lemon tart for Tomás.",
        "On 2 March 2024, Priya said that she baked a lemon tart for Tomás.",
        "Yesterday Priya baked a lemon tart for Tomás.",
        "[March 2nd, 2024] Priya — baked a lemon tart for Tomás",
    ],
)
def test_the_subject_is_the_first_name_wherever_the_layout_puts_it(text: str) -> None:
    assert subject(text) == "Priya"
    assert names(text) == ("Priya", "Tomás")


def test_greetings_and_words_of_time_are_not_the_subject_of_an_address() -> None:
    assert subject("Hey Priya, how was Tuesday?") == ""  # the addressee is not the subject
    assert "Tuesday" not in names("See you Tuesday, Priya") and "I" not in names("I think I'm fine")
    assert names("Thanks Priya! Priya's tart was great") == ("Priya",)  # greetings are not names


@pytest.mark.req("quality:layouts")
@pytest.mark.parametrize(
    ("text", "who"),
    [
        ("Thanks, Priya! I finally finished the tart.", ""),
        ("I totally agree, Priya; the tart was great.", ""),
        ("Priya, that tart looks amazing!", ""),
        ("Hey Priya. Tomás baked the bread.", "Tomás"),
        ("It was great to see you, Priya.", ""),
        ("Priya: thanks, Tomás!", "Priya"),
        ("On 2 March 2024, Priya said that the tart was for Tomás.", "Priya"),
        ("2024-03-02 — Priya: Hi Tomás, the tart is ready.", "Priya"),
        ("I had lunch with Priya.", "Priya"),
    ],
)
def test_the_person_spoken_to_is_not_the_subject(text: str, who: str) -> None:
    assert subject(text) == who


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("on 8 May 2023 we met", [date(2023, 5, 8)]),
        ("May 8, 2023 and 2023-06-01", [date(2023, 5, 8), date(2023, 6, 1)]),
        ("the 3rd of March", [date(2024, 3, 3)]),  # no year: the nearest to when it was written
        ("on December 30", [date(2023, 12, 30)]),
        ("yesterday", [date(2024, 3, 5)]),
        ("last Tuesday", [date(2024, 3, 5)]),
        ("next Monday", [date(2024, 3, 11)]),
        ("two weeks ago", [date(2024, 2, 21)]),
        ("3 days ago", [date(2024, 3, 3)]),
        ("last month", [date(2024, 2, 1)]),
        ("nothing dated here, not even 12/05", []),
    ],
)
def test_days_written_in_the_text_absolute_and_relative_to_the_memory(text: str, days: list[date]) -> None:
    assert [d for d, _ in written_days(text, WRITTEN)] == days


def test_relative_days_need_the_memory_s_time_and_only_a_leading_full_date_is_stated() -> None:
    assert written_days("yesterday", None) == ()
    assert stated_day("2024-03-02 Priya: hello") == date(2024, 3, 2)
    assert stated_day("Priya: see you on 9 May") is None  # no year: not a dated entry
    written = datetime(2026, 12, 1, 23, 30, tzinfo=UTC)
    assert stated_day("Deadline 2027-03-01: ship the importer", written) is None  # a plan, not its day
    assert stated_day("Due 1 March 2027; agreed on 30 Nov 2026", written) == date(2026, 11, 30)
    assert stated_day("2026-12-02 standup notes", written) == date(2026, 12, 2)  # a day's grace: zones


def test_index_rows_carry_written_days_names_and_the_stated_session() -> None:
    item = docs.Item(
        "nte_1", "note", "On 2 March 2024, Priya said she met Tomás yesterday.", WRITTEN, "live",
        None, "chat", (), None, "nte_1",
    )  # fmt: skip
    (doc,) = docs.item_docs(item, None, None)
    assert doc.speaker == "Priya" and doc.names == "Priya Tomás"
    assert "2 March 2024" in doc.dates and "6 March 2024" in doc.dates and "2024-03-05" in doc.dates
    assert doc.grp.endswith("2024-03-02")
    other = docs.Item(
        "nte_2", "note", "On 4 March 2024, Tomás said hi.", WRITTEN, "live", None, "chat", (), None, "nte_2"
    )
    assert docs.item_docs(item, None, other)[0].context == ""  # dated entries of other days


@pytest.mark.parametrize(
    "text",
    [
        "we met yesterday",
        "LAST WEEK it rained",
        "two weeks ago",
        "Tonight!",
        "this month",
        "laſt week",
        "tonıght",
        "İt was this year",
        "next Monday",
        "nothing of the kind here",
        "2023-05-08",
        "on 8 May 2023",
        "٣ days ago",
        "a dated ８ May 2023",
        "plain words only",
    ],
)
def test_the_quick_checks_never_skip_a_date_the_expressions_would_find(text: str) -> None:
    """The digit and word checks in front of the date expressions are only shortcuts: whatever
    the expressions match, the checks let through."""
    from engine.index import mentions

    if mentions._RELATIVE.search(text):
        assert mentions.may_be_relative(text)
    if any(r.search(text) for r in (mentions._DAY_MONTH, mentions._MONTH_DAY, mentions._ISO)):
        assert mentions._DIGIT.search(text)
