from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.index import docs as index_docs


def item(i: str, text: str, minutes: int = 0, source: str = "chat") -> index_docs.Item:
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC) + timedelta(minutes=minutes)
    return index_docs.Item(i, "note", text, when, "live", None, source, ("deploy",), None, i)


@pytest.mark.req("engine:index")
def test_long_notes_are_chunked_on_boundaries_without_losing_words() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 150 for i in range(12))
    chunks = index_docs.chunk_text(text)
    assert len(chunks) > 5
    assert all(len(c) <= 1000 for c in chunks)
    assert " ".join(chunks).split() == text.split()
    assert index_docs.chunk_text("short") == ["short"]


@pytest.mark.req("engine:index")
def test_a_chunk_carries_neighbours_date_words_speaker_and_session() -> None:
    a, b, c = (
        item("nte_a", "Caroline: I went to a support group", 0),
        item("nte_b", "Melanie: How was it?", 1),
        item("nte_c", "Caroline: Powerful.", 2),
    )
    (doc,) = index_docs.item_docs(b, a, c)
    assert doc.context == "Caroline: I went to a support group\nCaroline: Powerful."
    assert doc.embed_text.splitlines() == [a.text, b.text, c.text]
    assert doc.speaker == "Melanie"
    assert "8 May 2023" in doc.dates and "2023-05-08" in doc.dates
    assert doc.grp.endswith("2023-05-08")
    far = item("nte_z", "much later", 60 * 24)
    (alone,) = index_docs.item_docs(far, c, None)
    assert alone.context == ""  # a day apart: not neighbours


@pytest.mark.req("engine:index")
def test_all_docs_orders_streams_by_time_and_keeps_sources_apart() -> None:
    items = [item("nte_2", "two", 2), item("nte_1", "one", 1), item("nte_x", "other", 1, source="cli")]
    docs = {d.memory: d for d in index_docs.all_docs(items)}
    assert docs["nte_2"].context == "one"
    assert docs["nte_x"].context == ""


@pytest.mark.req("recall:graph")
def test_wikilinks_are_parsed_and_normalised() -> None:
    text = "see [[Deploy Guide]], [[notes/Runbook.md|the runbook]] and [[Deploy Guide#Rollback]]"
    assert index_docs.wikilinks(text) == ("deploy guide", "runbook")


@pytest.mark.req("quality:layouts")
def test_an_undated_memory_carries_the_day_of_the_dated_entry_before_it_in_the_same_sitting() -> None:
    members = [
        item("nte_1", "8 May 2023 — met the landlord about the lease", 0),
        item("nte_2", "He wants the deposit by Friday", 1),  # carries 8 May
        item("nte_3", "and a copy of my passport", 2),  # still 8 May
        item("nte_4", "On 2 May 2023, the keys arrived", 3),  # states its own day
        item("nte_5", "All three of them", 4),  # carries 2 May
        item("nte_6", "A new sitting, nothing dated", 60 * 7),  # 7 h later: carries nothing
    ]
    days = index_docs.stream_days(members)
    assert [d and d.isoformat() for d in days] == [
        "2023-05-08", "2023-05-08", "2023-05-08", "2023-05-02", "2023-05-02", None,
    ]  # fmt: skip
    docs = {d.memory: d for d in index_docs.all_docs(members)}
    assert docs["nte_2"].grp.endswith("2023-05-08") and docs["nte_5"].grp.endswith("2023-05-02")
    assert "2 May 2023" in docs["nte_5"].dates and "2 May 2023" not in docs["nte_6"].dates
    assert docs["nte_6"].grp.endswith(members[-1].created.date().isoformat())  # type: ignore[union-attr]
    assert docs["nte_3"].context == "He wants the deposit by Friday"  # 8 May and 2 May: not neighbours
    assert docs["nte_5"].context == "On 2 May 2023, the keys arrived"
    # without the stream's days, each memory has only its own
    (alone,) = index_docs.item_docs(members[1], members[0], members[2])
    assert alone.grp.endswith("2023-05-08")  # written that day in this test; its own day, not carried
    assert "8 May 2023" in alone.dates


@pytest.mark.req("quality:layouts")
def test_a_deadline_is_not_the_day_a_memory_is_about_and_is_not_carried() -> None:
    """A date after the memory was written is a plan or a deadline: the undated memories after it
    keep their own day (the test's memories are written on 8 May 2023)."""
    members = [
        item("nte_1", "2023-06-30: the deadline for the grant report", 0),
        item("nte_2", "Priya drafts the budget section", 1),
        item("nte_3", "8 May 2023 — met the landlord", 2),
        item("nte_4", "He wants the deposit", 3),
    ]
    days = index_docs.stream_days(members)
    assert [d and d.isoformat() for d in days] == [None, None, "2023-05-08", "2023-05-08"]
    docs = {d.memory: d for d in index_docs.all_docs(members)}
    assert docs["nte_2"].grp.endswith("2023-05-08")  # the day it was written, not the deadline's
    assert "30 June 2023" in docs["nte_1"].dates  # the deadline is still a date the memory names
    assert "30 June 2023" not in docs["nte_2"].dates
