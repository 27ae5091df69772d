"""The index's reads on a connection of their own: a search answers while a write transaction is
held open, sees the rows as they were until it commits, and sees the commit at once after."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.engine.index.helpers import CALLER, engine, flip_vector


class _RolledBack(Exception):
    """Ends the held transaction without committing it."""


@pytest.mark.req("rel:load", "recall:get-context", "recall:fresh-facts")
def test_a_search_answers_while_a_write_transaction_is_held_open(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        note = e.memory.remember(CALLER, "The zebra crossing by the school is repainted on Fridays.")
        e.settle()
        db = e.indexer.db
        held, release = threading.Event(), threading.Event()
        replies: list[dict[str, Any]] = []
        answered = threading.Event()

        def writer_mid_commit() -> None:
            """A write holding the index's write lock inside its transaction: the note's rows
            deleted, not committed (then rolled back)."""
            try:
                with db.lock, db.db:
                    db.db.execute("DELETE FROM chunks WHERE memory = ?", (note.id,))
                    held.set()
                    release.wait(60)
                    raise _RolledBack
            except _RolledBack:
                return

        def reader() -> None:
            replies.append(e.recall.get_context(CALLER, "zebra crossing repainted"))
            answered.set()

        writing = threading.Thread(target=writer_mid_commit)
        writing.start()
        try:
            assert held.wait(60)
            reading = threading.Thread(target=reader)
            reading.start()
            assert answered.wait(60), "get_context waited for the write transaction"
            # it read the rows as they were before the write, whole
            assert [n["id"] for n in replies[0]["notes"]][:1] == [note.id]
        finally:
            release.set()
            writing.join(60)
        reading.join(60)
        # a committed write is seen by the next search straight away (read-your-writes)
        fresh = e.memory.remember(CALLER, "The zebra crossing gets new lights in May.")
        found = {n["id"] for n in e.recall.get_context(CALLER, "zebra crossing lights")["notes"]}
        assert fresh.id in found and note.id in found


@pytest.mark.req("recall:get-context")
def test_vectors_changed_while_a_search_loads_them_are_taken_after_the_commit(tmp_path: Path) -> None:
    """The reader's in-memory vectors are told about a write only once it commits: a search that
    loads them mid-transaction reads the old vector, and the next one reads the new."""
    with engine(tmp_path) as e:
        note = e.memory.remember(CALLER, "Harbour cranes unload containers at night.")
        e.settle()
        db = e.indexer.db
        reader = db.reader
        (rowid,) = [r for (r,) in db.db.execute("SELECT id FROM chunks WHERE memory = ?", (note.id,))]
        query = e.indexer.embedder.embed_query("harbour cranes")
        before = reader.cosines("chunks", query, [rowid])[rowid]
        with db.transaction():
            flip_vector(db, rowid)
            reader.forget_vectors()  # the next search loads the matrix now, mid-transaction
            assert reader.cosines("chunks", query, [rowid])[rowid] == pytest.approx(before, abs=1e-3)
        assert reader.cosines("chunks", query, [rowid])[rowid] == pytest.approx(-before, abs=1e-3)
