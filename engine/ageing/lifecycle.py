"""The ageing machinery of one workspace, wired once by the composition root.

- :meth:`Lifecycle.saved` — called by :class:`~engine.memory.Memory` after a write: wakes the sweep;
- :meth:`Lifecycle.decay_of` — recall's ranking reads a note's decay score (pure over what is known);
- :meth:`Lifecycle.after_context` — called after ``get_context`` answered: cites what it returned
  (not archived notes) and writes the retrieval log line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from engine.ageing import decay
from engine.ageing.archive import Sweeper, aging_of
from engine.ageing.citations import Citations
from engine.ageing.retrieval_log import RetrievalLog, of_reply
from engine.settings import EngineSettings
from engine.store.model import State
from engine.store.workspace import Workspace


class Lifecycle:
    def __init__(
        self,
        ws: Workspace,
        settings: EngineSettings,
        clock: Callable[[], datetime],
        *,
        fold_interval_s: float | None = 30.0,
    ) -> None:
        self.ws = ws
        self.clock = clock
        self.half_life_days = settings.half_life_days
        self.citations = Citations(ws, fold_interval_s=fold_interval_s)
        self.sweeper = Sweeper(ws, clock, settings.half_life_days, self.citations.last_cited)
        self.log = RetrievalLog(
            ws.root, max_bytes=settings.retrieval_log_max_bytes, log_queries=settings.log_queries
        )

    def start(self, *, background: bool = True) -> None:
        self.citations.start(background=background)
        self.sweeper.start()
        self.sweeper.poke()  # what aged while no engine ran

    def stop(self) -> None:
        self.sweeper.stop()
        self.citations.stop()

    def saved(self) -> None:
        self.sweeper.poke()

    def decay_of(self, memory_id: str, now: datetime) -> float | None:
        """A live note's decay score now; None for anything that does not decay (logs, facts)."""
        record = self.ws.notes.get(memory_id)
        if record is None:
            return None
        aging = aging_of(record.note, self.citations.last_cited(memory_id))
        return decay.score(aging, now, self.half_life_days)

    def after_context(
        self,
        reply: Mapping[str, Any],
        *,
        query: str | None,
        scope: str | None,
        latency_ms: float,
        source: str | None,
        connection_id: str | None = None,
    ) -> None:
        now = self.clock()
        cited = [
            n["id"]
            for n in reply.get("notes", ())
            if (r := self.ws.notes.get(n["id"])) is not None and r.state is State.LIVE
        ]
        self.citations.record(cited, now)
        self.log.write(
            of_reply(
                reply,
                when=now,
                query=query,
                scope=scope,
                latency_ms=latency_ms,
                source=source,
                connection_id=connection_id,
            )
        )
