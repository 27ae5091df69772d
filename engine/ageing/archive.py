"""Cold storage (``life:archive``): the banner (pure) and the sweep that moves decayed notes.

A live note whose decay score fell below :data:`~engine.ageing.decay.ARCHIVE_BELOW` (and that is
not pinned) is moved from ``notes/`` to ``archive/`` (same relative path), with the mandatory
banner as the first lines of its body::

    > **⚠️ From cold storage — this was true at one time, but it may not be true now.**
    > Archived 2026-08-28T19:30:00.000000Z; unverified since. Reason: decayed out (score 0.198 after 141d).

The banner travels with the words everywhere, into ``get_context`` too. Nothing is deleted:
``restore_memory`` moves the file back and takes the banner off. The sweep runs after a save
(in a background thread, so a save does not wait for it) and never on a search.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from engine.ageing import decay
from engine.store.cold import with_banner
from engine.store.model import Note, State
from engine.store.workspace import Workspace

log = logging.getLogger("almanac.engine.ageing")


def reason_decayed(score: float, age_days: float) -> str:
    return f"decayed out (score {score:.3f} after {int(age_days)}d)"


def aging_of(note: Note, cited: datetime | None = None) -> decay.Aging:
    """A note's ageing facts; ``cited`` is a citation not yet folded into its file."""
    last = max((t for t in (note.last_cited, cited) if t is not None), default=None)
    return decay.Aging(note.created, note.updated, last, note.importance)


def sweep(
    ws: Workspace,
    now: datetime,
    half_life_days: float,
    cited: Callable[[str], datetime | None] = lambda _id: None,
) -> list[str]:
    """Archive every live note that decayed out; returns their ids. Call with nothing held."""
    with ws.lock:
        live = [r.note for r in ws.notes.values() if r.state is State.LIVE and r.note.unread is None]
    moved: list[str] = []
    for note in live:
        aging = aging_of(note, cited(note.id))
        if not decay.archive_candidate(aging, now, half_life_days):
            continue
        reason = reason_decayed(decay.score(aging, now, half_life_days), decay.age_days(aging, now))
        with ws.lock:
            record = ws.notes.get(note.id)
            if record is None or record.state is not State.LIVE or record.note != note:
                continue  # changed since we looked: the next sweep decides again
            ws.rewrite_note(replace(note, body=with_banner(note.body, now, reason)), State.ARCHIVED)
        moved.append(note.id)
        log.info("archived %s: %s", note.id, reason)
    return moved


#: A save this soon (engine clock) after the last sweep adds no sweep of its own: decay is
#: counted in days, so what crossed the line in the last minute is archived by the next save after
#: it, and a write costs the same in a workspace of 100 notes or 100,000 (``perf:write``).
MIN_GAP = timedelta(seconds=60)


class Sweeper:
    """Runs :func:`sweep` in a background thread whenever :meth:`poke` is called (after a save).

    Pokes that arrive while a sweep runs coalesce into one more sweep; a poke less than
    :data:`MIN_GAP` (engine clock) after the last sweep is answered by it, without waking the
    thread (a save then costs no thread hand-off: ``perf:write``, ``perf:gateway``).
    :meth:`wait_idle` lets a caller (a test) wait until every requested sweep is done.
    """

    def __init__(
        self,
        ws: Workspace,
        clock: Callable[[], datetime],
        half_life_days: float,
        cited: Callable[[str], datetime | None] = lambda _id: None,
    ) -> None:
        self.ws, self.clock, self.half_life_days, self.cited = ws, clock, half_life_days, cited
        self._cond = threading.Condition()
        self._wanted = 0
        self._done = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._last: datetime | None = None  # engine time of the last sweep
        self.sweeps = 0
        self.wakeups = 0  # pokes that woke the thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="almanac-sweep", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def poke(self) -> None:
        last = self._last
        if last is not None and timedelta(0) <= self.clock() - last < MIN_GAP:
            return  # the thread would find nothing to do: let it sleep
        with self._cond:
            self._wanted += 1
            self.wakeups += 1
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._cond:
            target = self._wanted
            return self._cond.wait_for(lambda: self._done >= target or self._stopping, timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._wanted > self._done or self._stopping)
                if self._stopping:
                    return
                target = self._wanted
            now = self.clock()
            if self._last is None or not timedelta(0) <= now - self._last < MIN_GAP:
                try:
                    sweep(self.ws, now, self.half_life_days, self.cited)
                    self._last = now
                    self.sweeps += 1
                except Exception:  # a failed sweep must not stop later ones; nothing was lost
                    log.exception("the archive sweep failed")
            with self._cond:
                self._done = target
                self._cond.notify_all()
