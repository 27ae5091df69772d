"""Who wrote each memory of a two-person exchange kept without names (``quality:layouts``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from engine.index import voices
from engine.index.indexer import INDEX_DIR, Indexer
from engine.memory import Memory
from engine.store.workspace import Workspace
from tests.engine.index.helpers import CALLER, EMBEDDER, Clock, engine

# An exchange between Priya and Sam, written turn by turn with nothing saying who spoke; Priya
# opens. Only some turns speak to the other by name.
EXCHANGE = [
    "Hey Sam, how was the weekend?",
    "Great! I finally fixed the old bike.",
    "Nice work, Sam! Where did you find the parts?",
    "A shop by the river had the chain.",
    "I should take mine there too.",
    "Do it, Priya. They were quick and cheap.",
    "I will. My gears slip all the time.",
    "Then ask for the tall mechanic, he knows gears.",
]
SPEAKERS = ["priya", "sam"] * 4


def turns(texts: list[str]) -> list[voices.Turn]:
    return [voices.turn_of(t) for t in texts]


@pytest.mark.req("quality:layouts")
def test_the_writer_of_every_turn_of_an_unnamed_exchange_is_worked_out() -> None:
    found = turns(EXCHANGE)
    for at, who in enumerate(SPEAKERS):
        voice = voices.voice(found, at)
        assert set(voice) == {"priya", "sam"}
        assert voice[who] >= 0.9, (at, EXCHANGE[at], voice)
        assert voice["sam" if who == "priya" else "priya"] <= 0.1


@pytest.mark.req("quality:layouts")
def test_speaking_to_someone_by_name_marks_only_strict_addresses() -> None:
    assert voices.vocatives("Thanks, Priya! It was fun.") == {"priya"}
    assert voices.vocatives("Hey Priya, look at this.") == {"priya"}
    assert voices.vocatives("Wow Sam!") == {"sam"}
    assert voices.vocatives("I told Priya about it.") == frozenset()
    assert voices.vocatives("Cool, that works. Definitely!") == frozenset()  # a sentence's first word
    assert voices.vocatives("Priya, look.") == frozenset()  # could as well be "Definitely, look."


@pytest.mark.req("quality:layouts")
def test_a_nickname_counts_as_the_name_it_shortens() -> None:
    texts = ["Hey Mel, how are you?", "Good, Caroline! Busy.", "Same here, Melanie.", "Sounds busy."]
    voice = voices.voice(turns(texts), 3)
    assert voice["melanie"] == voice["mel"] >= 0.9
    assert voices.chance_by(voice, ["melanie"]) == voice["melanie"]
    assert voices.chance_by(voice, ["mel"]) == voice["melanie"]
    assert voices.chance_by(voice, ["tomás"]) is None


@pytest.mark.req("quality:layouts")
def test_notes_that_speak_to_nobody_or_to_many_get_no_writer() -> None:
    notes = ["The staging database lives in Frankfurt.", "Deploys happen on Tuesdays.", "Alice owns billing."]
    assert all(voices.voice(turns(notes), i) == {} for i in range(len(notes)))
    many = ["Thanks, Alice!", "Hi Bob, welcome.", "Sure, Carol.", "Right, Dave.", "Agreed, Erin."]
    assert all(voices.voice(turns(many), i) == {} for i in range(len(many)))


@pytest.mark.req("quality:layouts")
def test_a_memory_s_writer_depends_only_on_its_window() -> None:
    long = turns(EXCHANGE * 12)
    assert len(long) > 2 * voices.WINDOW + 2
    for at in (0, 5, voices.WINDOW, len(long) - 1):
        lo, hi = max(at - voices.WINDOW, 0), min(at + voices.WINDOW + 1, len(long))
        assert voices.voice(long, at) == voices.voice(long[lo:hi], at - lo)


def test_encoded_voices_read_back() -> None:
    voice = {"mel": 0.97, "melanie": 0.97, "caroline": 0.03}
    assert voices.decode(voices.encode(voice)) == voice
    assert voices.encode({}) == "" and voices.decode("") == {}


@pytest.mark.req("quality:layouts")
@pytest.mark.req("engine:rebuild")
def test_the_index_keeps_who_wrote_what_in_step_with_writes_like_a_rebuild(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        ids = [e.memory.remember(CALLER, text).id for text in EXCHANGE]
        e.settle()
        found = e.indexer.db.reader.voices(ids)
        assert set(found) == set(ids)
        for memory, who in zip(ids, SPEAKERS, strict=True):
            assert voices.decode(found[memory])[who] >= 0.9
        # a turn taken away: the rest follow, and its own row goes with it
        e.memory.retire(CALLER, ids[3])
        e.memory.remember(CALLER, "Sounds good, Sam.")
        e.settle()
        assert ids[3] not in e.indexer.db.reader.voices(ids)
        incremental = list(e.indexer.db.reader.dump())
    assert any(row[0] == "voices" for row in incremental)
    for p in (tmp_path / INDEX_DIR).glob("index.sqlite*"):
        p.unlink()
    with engine(tmp_path) as e:
        assert list(e.indexer.db.reader.dump()) == incremental


def _start_without_background(root: Path) -> tuple[Workspace, Indexer]:
    ws = Workspace(root)
    ws.open()
    indexer = Indexer(ws, EMBEDDER, scan_interval_s=None)
    indexer.start(background=False)  # nothing is worked out in the background meanwhile
    return ws, indexer


@pytest.mark.req("engine:rebuild")
def test_a_clean_stop_leaves_every_writer_worked_out(tmp_path: Path) -> None:
    """The clean-stop mark lets the next start trust the rows as they are: who wrote what, left
    to the background thread, is finished before the mark is left."""
    ws, indexer = _start_without_background(tmp_path)
    memory = Memory(ws, clock=Clock())
    ids = [memory.remember(CALLER, text).id for text in EXCHANGE]
    assert indexer.db.reader.voices(ids) == {}
    assert indexer.stop()
    ws.close()
    ws, indexer = _start_without_background(tmp_path)  # the mark holds: nothing is redone
    try:
        assert set(indexer.db.reader.voices(ids)) == set(ids)
    finally:
        indexer.stop()
        ws.close()


@pytest.mark.req("quality:layouts")
def test_an_exchange_ends_with_its_sitting(tmp_path: Path) -> None:
    """Memories written more than 6 h after the one before them are another sitting: the
    exchange before does not say who wrote them."""
    with engine(tmp_path) as e:
        chat = [e.memory.remember(CALLER, text).id for text in EXCHANGE]
        e.clock.now += timedelta(hours=7)
        later = [e.memory.remember(CALLER, text).id for text in ("Bought a new chain.", "It fits.")]
        e.settle()
        found = e.indexer.db.reader.voices(chat + later)
        assert set(found) == set(chat)


@pytest.mark.req("engine:rebuild")
def test_a_stop_with_too_many_writers_left_leaves_no_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop works out at most a bounded number of writers; with more left it leaves no clean
    mark, so the next start compares everything (and works them all out) instead."""
    import engine.index.indexer as indexer_module

    monkeypatch.setattr(indexer_module, "_UNVOICED_AT_STOP", len(EXCHANGE) - 1)
    ws, indexer = _start_without_background(tmp_path)
    memory = Memory(ws, clock=Clock())
    ids = [memory.remember(CALLER, text).id for text in EXCHANGE]
    assert indexer.stop()
    ws.close()
    ws, indexer = _start_without_background(tmp_path)  # no mark: every row compared, writers to do
    try:
        assert indexer.db.reader.voices(ids) == {}
        assert indexer._refresh_voices(None) == len(ids)
        assert set(indexer.db.reader.voices(ids)) == set(ids)
    finally:
        indexer.stop()
        ws.close()
