"""A workspace holding the hostile store (``tests/hostile_store.py``) opens at once and in little
memory (``rel:fuzz``, ``store:bad-file``): every hostile file is named, each note is kept as it is
and read by its body alone, and nothing the engine does on its own rewrites one."""

from __future__ import annotations

import json
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.ageing import archive
from engine.errors import KeptAsIs
from engine.store.layout import CACHE, MEMO_NAME
from engine.store.model import State
from engine.store.workspace import Workspace
from tests import hostile_store
from tests.engine.support import snapshot

#: Generous for a handful of files on a loaded machine; expanding the bombs takes minutes.
BOUND_S = 10.0
BOUND_BYTES = 64 * 1024 * 1024


def opened(root: Path) -> Workspace:
    tracemalloc.start()
    started = time.monotonic()
    try:
        ws = Workspace(root)
        ws.open()
        took = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert took < BOUND_S, f"opening took {took:.1f} s"
    assert peak < BOUND_BYTES, f"opening used {peak:,} bytes"
    return ws


@pytest.mark.req("rel:fuzz", "store:bad-file")
def test_the_hostile_store_opens_at_once_and_names_every_hostile_file(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    written = hostile_store.write(root)
    for _ in range(2):  # the second open reads the YAML memo the first wrote
        ws = opened(root)
        try:
            problems = {p.path: p.message for p in ws.problems}
            for note in hostile_store.NOTES:
                assert "frontmatter was not read" in problems[note.path], problems
                assert "kept as it is" in problems[note.path]
            assert "more than 10,000 values" in problems[hostile_store.LEDGER]
            bodies = {r.note.body: r for r in ws.notes.values()}
            for note in hostile_store.NOTES:
                record = bodies[f"The {note.word} is in this note's body."]
                assert record.note.unread is not None and record.note.extra == {}
            assert "nte_plain" in ws.notes and ws.notes["nte_plain"].note.tags == ("ok",)
            assert [v.object for r in ws.facts.records.values() for v in r.values] == ["Postgres"]
        finally:
            ws.close()
    assert snapshot(root) == written
    memo = json.loads((root / CACHE / MEMO_NAME).read_text(encoding="utf-8"))
    assert not any("*l0" in key or "*self" in key for key in memo["blocks"])


def test_a_kept_note_is_never_rewritten(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    written = hostile_store.write(root)
    ws = opened(root)
    try:
        kept = next(r for r in ws.notes.values() if r.note.unread is not None)
        with ws.lock, pytest.raises(KeptAsIs, match="fix its frontmatter by hand"):
            ws.rewrite_note(kept.note, State.ARCHIVED)
        far = datetime.now(UTC) + timedelta(days=3650)
        moved = archive.sweep(ws, far, half_life_days=1)
        assert "nte_plain" in moved  # the sweep ran, and took what had decayed
        assert not {r.note.id for r in ws.notes.values() if r.note.unread} & set(moved)
    finally:
        ws.close()
    assert {k: v for k, v in snapshot(root).items() if k in written and k != hostile_store.PLAIN_NOTE[0]} == {
        k: v for k, v in written.items() if k != hostile_store.PLAIN_NOTE[0]
    }
