"""Reads from many threads at once (engine/index/reads.py): a committed write is seen by every
reading thread, through every kept copy, after its commit and never before. Searches share one
read connection and its lock (docs/perf-journal/2026-12-04-reader-pool.md: a pool of read
connections was built and measured no faster on this host, so it was not kept)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from engine.index.schema import CHUNK_WEIGHTS
from tests.engine.index.helpers import CALLER, engine, flip_vector


@pytest.mark.req("rel:load", "recall:fresh-facts", "recall:get-context")
def test_a_committed_write_is_seen_by_every_reading_thread_and_not_before(tmp_path: Path) -> None:
    """Threads reading at once see a write's row, vector and words (the kept rows, vector matrix,
    term counts and name lookups) only once it has committed, then all of them."""
    with engine(tmp_path) as e:
        note = e.memory.remember(CALLER, "Harbour cranes unload the containers at night.")
        e.memory.remember(CALLER, "The harbour master walks the pier at noon.")
        e.settle()
        db, reader = e.indexer.db, e.indexer.db.reader
        (rowid,) = [r for (r,) in db.db.execute("SELECT id FROM chunks WHERE memory = ?", (note.id,))]
        query = e.indexer.embedder.embed_query("harbour cranes")
        before = reader.cosines("chunks", query, [rowid])[rowid]  # the kept copies, filled
        assert reader.keyword("chunks", ["zyzzyva"], CHUNK_WEIGHTS, 10, 8000)[0] == []

        def seen() -> tuple[bool, float, bool, list[int]]:
            row = reader.chunk_rows([rowid])[rowid]
            found, _ = reader.keyword("chunks", ["zyzzyva"], CHUNK_WEIGHTS, 10, 8000)
            return (
                "zyzzyva" in row.text,
                reader.cosines("chunks", query, [rowid])[rowid],
                reader.exists("chunks", '"zyzzyva"'),
                [r for r, _ in found],
            )

        n = 4
        steps = threading.Barrier(n + 1, timeout=60)
        views: dict[int, list[Any]] = {}

        def reading(k: int) -> None:
            steps.wait()  # every thread starts reading at once
            views[k] = [seen()]
            steps.wait()  # … the write commits …
            steps.wait()
            views[k].append(seen())

        threads = [threading.Thread(target=reading, args=(k,), daemon=True) for k in range(n)]
        with db.transaction():
            db.db.execute("UPDATE chunks SET text = text || ' zyzzyva' WHERE id = ?", (rowid,))
            flip_vector(db, rowid)
            for thread in threads:
                thread.start()
            steps.wait()
            steps.wait()  # every thread has read once, the write still open
        steps.wait()  # committed
        for thread in threads:
            thread.join(60)
        assert len(views) == n
        for earlier, later in views.values():
            assert earlier[0] is False and earlier[2] is False and earlier[3] == []
            assert earlier[1] == pytest.approx(before, abs=1e-3)
            assert later[0] is True and later[2] is True and later[3] == [rowid]
            assert later[1] == pytest.approx(-before, abs=1e-3)
