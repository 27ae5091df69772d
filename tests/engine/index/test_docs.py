from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.index import docs as D


def item(i: str, text: str, minutes: int = 0, source: str = "chat") -> D.Item:
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC) + timedelta(minutes=minutes)
    return D.Item(i, "note", text, when, "live", None, source, ("deploy",), None, i)


@pytest.mark.req("engine:index")
def test_long_notes_are_chunked_on_boundaries_without_losing_words() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 150 for i in range(12))
    chunks = D.chunk_text(text)
    assert len(chunks) > 5
    assert all(len(c) <= 1000 for c in chunks)
    assert " ".join(chunks).split() == text.split()
    assert D.chunk_text("short") == ["short"]


@pytest.mark.req("engine:index")
def test_a_chunk_carries_neighbours_date_words_speaker_and_session() -> None:
    a, b, c = (
        item("nte_a", "Caroline: I went to a support group", 0),
        item("nte_b", "Melanie: How was it?", 1),
        item("nte_c", "Caroline: Powerful.", 2),
    )
    (doc,) = D.item_docs(b, a, c)
    assert doc.context == "Caroline: I went to a support group\nCaroline: Powerful."
    assert doc.embed_text.splitlines() == [a.text, b.text, c.text]
    assert doc.speaker == "Melanie"
    assert "8 May 2023" in doc.dates and "2023-05-08" in doc.dates
    assert doc.grp.endswith("2023-05-08")
    far = item("nte_z", "much later", 60 * 24)
    (alone,) = D.item_docs(far, c, None)
    assert alone.context == ""  # a day apart: not neighbours


@pytest.mark.req("engine:index")
def test_all_docs_orders_streams_by_time_and_keeps_sources_apart() -> None:
    items = [item("nte_2", "two", 2), item("nte_1", "one", 1), item("nte_x", "other", 1, source="cli")]
    docs = {d.memory: d for d in D.all_docs(items)}
    assert docs["nte_2"].context == "one"
    assert docs["nte_x"].context == ""


@pytest.mark.req("recall:graph")
def test_wikilinks_are_parsed_and_normalised() -> None:
    text = "see [[Deploy Guide]], [[notes/Runbook.md|the runbook]] and [[Deploy Guide#Rollback]]"
    assert D.wikilinks(text) == ("deploy guide", "runbook")
