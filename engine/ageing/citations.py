"""Citations (``life:cited``): an append-only journal, folded into the notes in the background.

Being returned by ``get_context`` refreshes a note's ``last-cited`` and bumps its ``citations``
(``updated`` is untouched). Rewriting note files on every search would make reads cost writes, so
a search only appends one short line to ``citations.jsonl`` in the workspace (no fsync) and
updates an in-memory table that decay reads at once. A background fold (every
``fold_interval_s``, and on stop) writes the counts into each note's frontmatter and starts a new
journal. The Markdown stays the source of truth and the journal holds only what is not folded
yet, so citations survive an index rebuild and a restart.

Folding is idempotent: the journal being folded is first renamed to ``citations.folding.jsonl``;
a journal line is skipped on replay when its note's ``last-cited`` is already at or past its time
(the fold sets ``last-cited`` to the newest time it folded). A crash loses at most the lines the
OS had not written yet — citations are hints for ageing, not acknowledged writes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO

from engine.store.model import State, format_time, parse_time
from engine.store.workspace import Workspace

log = logging.getLogger("almanac.engine.ageing")

JOURNAL = "citations.jsonl"
FOLDING = "citations.folding.jsonl"


@dataclass(frozen=True)
class Pending:
    count: int
    last: datetime


def _merge(table: dict[str, Pending], ids: Iterable[str], when: datetime) -> None:
    for memory_id in ids:
        old = table.get(memory_id)
        table[memory_id] = Pending(1, when) if old is None else Pending(old.count + 1, max(old.last, when))


class Citations:
    def __init__(self, ws: Workspace, *, fold_interval_s: float | None = 30.0) -> None:
        self.ws = ws
        self.path = ws.root / JOURNAL
        self.folding_path = ws.root / FOLDING
        self.fold_interval_s = fold_interval_s
        self._lock = threading.Lock()
        self._pending: dict[str, Pending] = {}
        self._folding: dict[str, Pending] = {}
        self._file: IO[str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fold_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, background: bool = True) -> None:
        """Replay what a previous run left unfolded, fold it, and start the fold timer."""
        with self._lock:
            for path in (self.folding_path, self.path):
                self._replay(path, self._pending)
        self.fold()
        if background and self.fold_interval_s:
            self._thread = threading.Thread(target=self._loop, name="almanac-citations", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        try:
            self.fold()
        finally:
            with self._lock:
                if self._file is not None:
                    self._file.close()
                    self._file = None

    def _loop(self) -> None:
        assert self.fold_interval_s is not None
        while not self._stop.wait(self.fold_interval_s):
            try:
                self.fold()
            except Exception:  # the journal keeps them; the next fold retries
                log.exception("folding citations into the notes failed")

    def _replay(self, path: Path, into: dict[str, Pending]) -> None:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                when = parse_time(entry["t"])
                ids = [str(i) for i in entry["ids"]]
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line
            for memory_id in ids:
                record = self.ws.notes.get(memory_id)
                if record is None:
                    continue
                folded = record.note.last_cited
                if folded is None or when > folded:
                    _merge(into, [memory_id], when)

    # -- the hot path ------------------------------------------------------------------------------

    def record(self, ids: Iterable[str], when: datetime) -> None:
        """``ids`` were put in front of a model at ``when``: one journal line, no note rewritten."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return
        line = json.dumps({"t": format_time(when), "ids": ids}, separators=(",", ":")) + "\n"
        with self._lock:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
            self._file.write(line)
            self._file.flush()
            _merge(self._pending, ids, when)

    def last_cited(self, memory_id: str) -> datetime | None:
        """A citation of ``memory_id`` not yet folded into its file (decay reads it)."""
        found = self._pending.get(memory_id) or self._folding.get(memory_id)
        return None if found is None else found.last

    # -- folding -----------------------------------------------------------------------------------

    def fold(self) -> int:
        """Write the pending citations into the notes' frontmatter; returns notes rewritten."""
        with self._fold_lock:
            with self._lock:
                if not self._pending and not self.folding_path.exists():
                    return 0
                if self._file is not None:
                    self._file.close()
                    self._file = None
                if self.path.exists() and not self.folding_path.exists():
                    self.path.rename(self.folding_path)
                elif self.path.exists():  # an earlier fold was interrupted: its lines are in _pending
                    with open(self.folding_path, "a", encoding="utf-8") as out:
                        out.write(self.path.read_text(encoding="utf-8", errors="replace"))
                    self.path.unlink()
                self._folding, self._pending = self._pending, {}
            written = 0
            for memory_id, pending in self._folding.items():
                with self.ws.lock:
                    record = self.ws.notes.get(memory_id)
                    if record is None or record.state is State.RETIRED or record.note.unread:
                        continue  # (a note kept as it is is never rewritten)
                    note = record.note
                    if note.last_cited is not None and pending.last <= note.last_cited:
                        continue
                    self.ws.rewrite_note(
                        replace(
                            note,
                            citations=(note.citations or 0) + pending.count,
                            last_cited=pending.last,
                        )
                    )
                    written += 1
            with self._lock:
                self._folding = {}
                with contextlib.suppress(FileNotFoundError):
                    self.folding_path.unlink()
            return written
