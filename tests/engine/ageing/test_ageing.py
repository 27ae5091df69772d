"""A workspace ageing through simulated time (injected clock, never slept on).

``life:archive``, ``life:decay``, ``life:cited``, ``life:rank-floors``, ``life:lexical``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.store.cold import BANNER, with_banner, without_banner
from engine.store.model import State, parse_time
from engine.store.notefile import parse_note
from tests.engine.ageing.helpers import CALLER, Aged, aged_engine
from tests.engine.conftest import Clock

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.md") if not p.name.startswith(".")}


def note_ids(reply: dict[str, object]) -> list[str]:
    return [n["id"] for n in reply["notes"]]  # type: ignore[attr-defined]


@pytest.mark.req("life:archive")
@pytest.mark.req("life:decay")
@pytest.mark.req("life:cited")
def test_a_simulated_year_archives_what_faded_and_keeps_pinned_and_cited(tmp_path: Path) -> None:
    clock = Clock(T0)
    root = tmp_path / "ws"
    with aged_engine(root, clock) as e:
        m = e.memory
        ordinary = m.remember(CALLER, "The kelp staging host runs the nightly reindex.").id
        important = m.remember(CALLER, "Fjord invoices are archived on sardine.", importance=0.75).id
        trivial = m.remember(CALLER, "The coffee machine on floor two is broken.", importance=0.2).id
        pinned = m.remember(CALLER, "Never deploy fjord on a Friday.", importance=0.95).id
        cited = m.remember(CALLER, "The walrus bucket holds the quarterly backups.").id
        fact = m.save_memory(CALLER, "Fjord", "database", "Postgres").id
        e.swept()
        assert {r.state for r in e.ws.notes.values()} == {State.LIVE}
        before = files(root)

        clock.set(day(300))  # a search that returns the walrus note resets its clock
        assert cited in note_ids(e.recall.get_context(CALLER, "walrus bucket quarterly backups"))

        clock.set(day(365))
        newcomer = m.remember(CALLER, "Otters now own the release checklist.").id  # a save: the sweep runs
        e.swept()
        states = {i: e.ws.notes[i].state for i in (ordinary, important, trivial, pinned, cited, newcomer)}
        assert states == {
            ordinary: State.ARCHIVED,
            important: State.ARCHIVED,  # half-life 120 d: 0.5 ^ (365/120) < 0.25
            trivial: State.ARCHIVED,
            pinned: State.LIVE,
            cited: State.LIVE,  # cited 65 days ago: 0.47
            newcomer: State.LIVE,
        }
        assert e.ws.facts.records[fact].current is not None  # facts do not decay
        # nothing was deleted: the same files, the archived ones moved to archive/
        after = files(root)
        assert len(after) == len(before) + 1
        moved = {p for p in after if p.startswith("archive/")}
        assert {p.replace("archive/", "notes/", 1) for p in moved} <= before
        text = (root / "archive" / e.ws.notes[ordinary].rel).read_text()
        body = parse_note(text, "x").body
        lines = body.split("\n")
        assert lines[0] == BANNER
        assert lines[1].startswith("> Archived 2027-01-01T09:00:00.")
        assert "; unverified since. Reason: decayed out (score 0.015 after 365d)." in lines[1]
        assert lines[3] == "The kelp staging host runs the nightly reindex."

        # hidden by default; reached on purpose with include_archived, banner first
        assert ordinary not in note_ids(e.recall.get_context(CALLER, "kelp staging nightly reindex"))
        reply = e.recall.get_context(CALLER, "kelp staging nightly reindex", include_archived=True)
        found = next(n for n in reply["notes"] if n["id"] == ordinary)
        assert found["text"].startswith(BANNER) and found["archived"] is True
        assert found["banner"] == BANNER
        # a deliberate look into cold storage does not refresh it
        e.ageing.citations.fold()
        assert e.ws.notes[ordinary].note.last_cited is None and e.ws.notes[ordinary].note.citations is None
        assert e.ageing.decay_of(ordinary, clock.now) == pytest.approx(0.5 ** (365 / 60), abs=1e-3)

        # restore brings it back whole, without the banner, and the next sweep leaves it
        assert m.restore(CALLER, ordinary).action == "restore"
        restored = e.ws.notes[ordinary]
        assert restored.state is State.LIVE
        assert restored.note.body == "The kelp staging host runs the nightly reindex."
        assert (root / "notes" / restored.rel).exists() and not (root / "archive" / restored.rel).exists()
        m.remember(CALLER, "Another save, another sweep.")
        e.swept()
        assert e.ws.notes[ordinary].state is State.LIVE
        assert ordinary in note_ids(e.recall.get_context(CALLER, "kelp staging nightly reindex"))
    # the engine's own settings: a longer half-life keeps them
    with aged_engine(tmp_path / "ws2", Clock(T0), {"half_life_days": 365}) as e:
        kept = e.memory.remember(CALLER, "The kelp staging host runs the nightly reindex.").id
        e.clock.set(day(365))
        e.memory.remember(CALLER, "Later.")
        e.swept()
        assert e.ws.notes[kept].state is State.LIVE


@pytest.mark.req("life:archive")
def test_the_banner_goes_on_once_and_comes_off_whole() -> None:
    body = "line one\n\n> a quote of my own"
    banner = with_banner(body, T0, "decayed out (score 0.198 after 141d)")
    assert banner.startswith(BANNER + "\n> Archived 2026-01-01T09:00:00.000000Z; unverified since. ")
    assert banner.split("\n")[1].endswith("Reason: decayed out (score 0.198 after 141d).")
    assert with_banner(banner, T0, "again").count(BANNER) == 1
    assert without_banner(banner) == body and without_banner(body) == body


@pytest.mark.req("life:cited")
def test_citations_are_journaled_on_search_and_folded_into_the_note_later(tmp_path: Path) -> None:
    clock = Clock(T0)
    root = tmp_path / "ws"
    with aged_engine(root, clock) as e:
        nid = e.memory.remember(CALLER, "The heron cluster serves the search API.").id
        path = e.ws.note_path(e.ws.notes[nid])
        file_before = path.read_bytes()
        clock.set(day(10))
        assert note_ids(e.recall.get_context(CALLER, "heron cluster search API")) == [nid]
        cited_at = clock.now
        assert path.read_bytes() == file_before  # the hot path rewrote no note
        assert (root / "citations.jsonl").read_text().count("\n") == 1
        assert e.ageing.decay_of(nid, day(10)) == pytest.approx(1.0, abs=1e-6)  # the clock restarted
        clock.set(day(20))
        e.recall.get_context(CALLER, "heron cluster")
        second = clock.now
        assert e.ageing.citations.fold() == 1
        note = e.ws.notes[nid].note
        assert note.citations == 2 and note.last_cited is not None and note.last_cited >= second > cited_at
        assert note.updated is None  # being read is not being edited
        assert not (root / "citations.jsonl").exists() and not (root / "citations.folding.jsonl").exists()
        on_disk = parse_note(path.read_text(), "x")
        assert on_disk.citations == 2 and on_disk.last_cited == note.last_cited
        assert on_disk.body == "The heron cluster serves the search API."
        clock.set(day(30))
        e.recall.get_context(CALLER, "heron cluster")  # left in the journal when the engine "crashes"
        e.ageing.citations._file.close()  # type: ignore[union-attr]
        e.ageing.citations._file = None
        e.ageing.citations._pending.clear()
    # the index is rebuilt from nothing: the citations are in the Markdown and the journal
    import shutil

    shutil.rmtree(root / ".index")
    with aged_engine(root, Clock(day(31))) as e:
        note = e.ws.notes[nid].note
        assert note.citations == 3  # the journal line was replayed and folded at start
        assert note.last_cited is not None and note.last_cited > second
    with aged_engine(root, Clock(day(32))) as e:
        assert e.ws.notes[nid].note.citations == 3  # folding twice counts nothing twice


@pytest.mark.req("life:cited")
def test_a_half_finished_fold_is_not_counted_twice(tmp_path: Path) -> None:
    clock = Clock(T0)
    root = tmp_path / "ws"
    with aged_engine(root, clock) as e:
        nid = e.memory.remember(CALLER, "Gannet is the metrics host.").id
        clock.set(day(1))
        e.recall.get_context(CALLER, "gannet metrics host")
        e.ageing.citations.fold()
        assert e.ws.notes[nid].note.citations == 1
        folded = e.ws.notes[nid].note.last_cited
    assert folded is not None
    # a crash after the note was written but before the folding journal was removed
    line = json.dumps({"t": folded.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "ids": [nid]}) + "\n"
    (root / "citations.folding.jsonl").write_text(line)
    with aged_engine(root, Clock(day(2))) as e:
        assert e.ws.notes[nid].note.citations == 1
        assert parse_time(folded.isoformat()) == e.ws.notes[nid].note.last_cited


@pytest.mark.req("life:rank-floors")
@pytest.mark.req("life:decay")
def test_decay_reorders_comparable_matches_but_never_sinks_a_strong_one(tmp_path: Path) -> None:
    clock = Clock(T0)
    with aged_engine(tmp_path / "ws", clock, {"half_life_days": 3650}) as e:
        # no shared name: the graph step would return (and so cite) the other note with the "blue" one
        cited = e.memory.remember(CALLER, "The pelican deploys use the blue pipeline.").id
        clock.set(day(1))
        strong_old = e.memory.remember(
            CALLER, "Cormorant rollback: cormorant rollback runbook for the cormorant rollback."
        ).id
        clock.set(day(1000))
        newer = e.memory.remember(CALLER, "The pelican deploys use the green pipeline.").id
        clock.set(day(2900))
        assert note_ids(e.recall.get_context(CALLER, "blue"))[0] == cited  # cited: its clock restarts
        clock.set(day(3000))
        weak_fresh = e.memory.remember(CALLER, "A cormorant was seen near the office.").id
        for n in range(8):  # other notes, so that no query word is in most of them
            e.memory.remember(CALLER, f"Filler note number {n} about lunch plans.")
        # two equally good matches: the fresher by decay first (a plain tie would go to the newer)
        reply = e.recall.get_context(CALLER, "pelican deploys pipeline")
        order = note_ids(reply)
        assert order.index(cited) < order.index(newer)
        # a strong old match stays above a weak fresh one
        order = [h.memory for h in e.recall.search("cormorant rollback runbook").hits]
        assert order[:2] == [strong_old, weak_fresh]


@pytest.mark.req("life:lexical")
def test_keyword_coverage_breaks_ties_in_ranking(tmp_path: Path) -> None:
    with aged_engine(tmp_path / "ws", Clock(T0)) as e:
        verbatim = e.memory.remember(CALLER, "notes on deploy branch policy and names windows").id
        scattered = e.memory.remember(CALLER, "policy notes: branch names and deploy windows").id
        order = note_ids(e.recall.get_context(CALLER, "deploy branch policy"))
        assert order[:2] == [verbatim, scattered]
        tagged = e.memory.remember(CALLER, "Staging uses the puffin cluster.", tags=["database"]).id
        body = e.memory.remember(CALLER, "Staging database uses the puffin cluster.").id
        order = note_ids(e.recall.get_context(CALLER, "staging database puffin"))
        assert order.index(tagged) < order.index(body)


def test_helpers_wait_on_conditions(tmp_path: Path) -> None:
    with aged_engine(tmp_path / "ws", Clock(T0)) as e:
        assert isinstance(e, Aged) and e.ageing.sweeper.wait_idle(5)


@pytest.mark.req("life:archive", "perf:write")
def test_saves_within_a_minute_of_a_sweep_add_none_and_a_save_after_it_sweeps(tmp_path: Path) -> None:
    clock = Clock(T0)
    with aged_engine(tmp_path / "ws", clock) as e:
        faded = e.memory.remember(CALLER, "The kelp staging host runs the nightly reindex.").id
        e.swept()
        clock.set(day(365))
        e.memory.remember(CALLER, "a save a year later: the sweep runs")
        e.swept()
        assert e.ws.notes[faded].state is State.ARCHIVED
        swept, woken = e.ageing.sweeper.sweeps, e.ageing.sweeper.wakeups
        for i in range(20):  # a burst of saves: each one would otherwise walk every note again
            e.memory.remember(CALLER, f"burst note {i}")
            e.swept()
        assert e.ageing.sweeper.sweeps == swept  # within a minute of the last sweep: none more
        assert e.ageing.sweeper.wakeups == woken  # and the sweep's thread was not even woken
        clock.set(day(365) + timedelta(seconds=61))
        e.memory.remember(CALLER, "a save a minute later")
        e.swept()
        assert e.ageing.sweeper.sweeps == swept + 1
        clock.set(day(300))  # the clock went back: the next save sweeps again
        e.memory.remember(CALLER, "a save after the clock went back")
        e.swept()
        assert e.ageing.sweeper.sweeps == swept + 2
