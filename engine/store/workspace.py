"""The workspace directory as one writer sees it: what is on disk, and the durable writes.

Where each file lives is :mod:`engine.store.layout` (see docs/store-format.md). Directories are
created on the first write into them. A note's state is the directory it is in. All methods that
write must be called with :attr:`Workspace.lock` held (the engine is the one writer; the lock
orders its threads). The ``stage_*`` writes are the exception: they are called holding
:attr:`Workspace.staging` and leave their fsyncs to a group commit (:mod:`engine.store.commit`).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from engine.errors import KeptAsIs, StoreUnavailable
from engine.store import cold, daylog, erasure, fsio, ids, ledger, notefile
from engine.store.commit import GroupCommit, Staged
from engine.store.facts import FactTable
from engine.store.fsio import durable, md_files, md_tree
from engine.store.layout import (
    ARCHIVED_NOTES,
    CACHE,
    FACTS,
    LIVE_LOGS,
    LIVE_NOTES,
    MEMO_NAME,
    RETIRED_LOGS,
    RETIRED_NOTES,
    STAGING_PREFIX,
    day_path,
    segment_path,
)
from engine.store.ledger import Problem
from engine.store.model import Event, LogEntry, Note, State
from engine.store.yamlmemo import YamlMemo

log = logging.getLogger("almanac.engine.store")

_NOTE_ROOTS = {State.LIVE: LIVE_NOTES, State.ARCHIVED: ARCHIVED_NOTES, State.RETIRED: RETIRED_NOTES}
_LOG_ROOTS = {State.LIVE: LIVE_LOGS, State.RETIRED: RETIRED_LOGS}


@dataclass(frozen=True)
class NoteRecord:
    note: Note
    rel: Path  # path below its state's root, e.g. 2026/11/30/nte_….md
    state: State


@dataclass(frozen=True)
class LogRecord:
    entry: LogEntry
    day: date
    state: State


@dataclass(frozen=True)
class FileProblem:
    path: str
    line: int
    message: str
    torn: bool = False


def content_key(scope: str | None, text: str) -> str:
    return hashlib.sha256(f"{scope or ''}\x1f{text.strip()}".encode()).hexdigest()


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root
        #: Concurrent new memories share their fsyncs (:mod:`engine.store.commit`).
        self.commits = GroupCommit()
        #: Held by a write from its first byte to its last fsync (one writer at a time); taking it
        #: first finishes the writes a group commit has registered.
        self.lock = self.commits.lock
        #: The same lock without that: held by a new memory while it decides and writes its bytes
        #: (``stage_*``), then let go while its group commit makes it durable.
        self.staging = self.commits.raw
        #: Held only while the in-memory state below changes, after the durable write: a reader
        #: that needs a consistent view takes this one alone and never waits for a write's fsync.
        self.view = threading.RLock()
        self.facts = FactTable()
        self.notes: dict[str, NoteRecord] = {}
        self.logs: dict[str, LogRecord] = {}
        self.note_by_content: dict[str, str] = {}
        self.deleted: dict[str, Event] = {}  # memory id -> its delete event (what the owner erased)
        self.retirements: dict[str, Event] = {}  # a retired memory's id -> its retire event (why, when)
        self.problems: list[FileProblem] = []
        self.yaml_parsed = 0  # YAML blocks the last load parsed (not from the memo)
        self.listeners: list[Callable[[str], None]] = []
        self._dir_lock = fsio.DirectoryLock(root)

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self, *, clear_staging: bool = True) -> None:
        """Take the directory lock (or raise WorkspaceLocked), remove any staging folder an
        interrupted import left (unless ``clear_staging`` is False: a read-only look), and read
        the store."""
        self._dir_lock.acquire()
        try:
            if clear_staging:
                self._clear_staging()
            self.load()
        except BaseException:
            self._dir_lock.release()
            raise

    def close(self) -> None:
        self._dir_lock.release()

    def _clear_staging(self) -> None:
        """Remove staging folders an interrupted import left (they never hold store data)."""
        try:
            found = [p for p in self.root.iterdir() if p.name.startswith(STAGING_PREFIX) and p.is_dir()]
        except OSError:
            return
        for path in found:
            shutil.rmtree(path, ignore_errors=True)
            log.warning("removed %s, left by an import that was interrupted", path.name)

    def load(self) -> None:
        with self.lock, self.view:
            self.facts = FactTable()
            self.notes.clear()
            self.logs.clear()
            self.note_by_content.clear()
            self.deleted.clear()
            self.retirements.clear()
            self.problems.clear()
            moved: dict[str, State] = {}  # a log entry's state as the ledger's last retire/restore says
            mentioned: set[str] = set()  # memories with blocks since their last delete event (if any)
            unfinished: set[str] = set()  # deletions whose erasure a crash interrupted
            memo = YamlMemo.read(self.root / CACHE / MEMO_NAME)
            for path in md_files(self.root / FACTS):
                text = self._read_text(path)
                if text is None:
                    continue
                parsed = ledger.parse_ledger(text, memo.load)
                self._report(path, parsed.problems)
                for event in parsed.events:
                    self.facts.apply(event)
                    self._note_retirement(event)
                    if event.kind == "delete":
                        self.deleted[event.memory] = event
                        if event.memory in mentioned:
                            unfinished.add(event.memory)
                        mentioned.discard(event.memory)
                        continue
                    mentioned.add(event.memory)
                    if event.kind in ("store", "supersede"):
                        self.deleted.pop(event.memory, None)  # the same fact, said again since
                    if event.kind in ("retire", "restore") and event.memory.startswith(ids.LOG + "_"):
                        moved[event.memory] = State.RETIRED if event.kind == "retire" else State.LIVE
            for state in (State.RETIRED, State.LIVE, State.ARCHIVED):
                base = self.root / _NOTE_ROOTS[state]
                for path, rel in md_tree(base):
                    self._load_note(path, rel, state, memo)
            memo.save()
            self.yaml_parsed = memo.parsed
            copies: dict[str, list[LogRecord]] = {}
            for state in (State.RETIRED, State.LIVE):
                base = self.root / _LOG_ROOTS[state]
                for path, rel in md_tree(base):
                    self._load_log(path, rel, state, copies)
            for entry_id, found in copies.items():
                self.logs[entry_id] = self._one_copy(found, moved.get(entry_id, State.LIVE))
            unfinished |= {m for m in self.deleted if m in self.notes or m in self.logs}
            for memory in sorted(unfinished):
                self._finish_erasure(memory)

    def _finish_erasure(self, memory: str) -> None:
        """Complete a deletion a crash interrupted after its delete event was written."""
        event = self.deleted[memory]
        try:
            self._erase(memory, event.event_id)
        except StoreUnavailable as exc:
            problem = Problem(1, f"could not finish deleting {memory}: {exc.message}")
            self._report(self.root / FACTS, [problem])
            return
        log.warning("finished deleting %s (an earlier deletion was interrupted)", memory)

    # -- reading -----------------------------------------------------------------------------

    def _read(self, path: Path) -> str:
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            return handle.read()

    def _read_text(self, path: Path, *, strict: bool = False) -> str | None:
        """The file's text, or None (reported) when it cannot be read or is binary.

        A NUL byte means binary: skipped. Other bytes that are not UTF-8 skip a note (``strict``);
        a ledger segment or day log is read with them replaced (U+FFFD) and the file is named,
        since one bad byte must not hide a month of facts.
        """
        try:
            data = path.read_bytes()
        except OSError as exc:
            self._report(path, [Problem(1, f"cannot be read: {exc.strerror or exc}")])
            return None
        if b"\0" in data:
            self._report(
                path, [Problem(1, "binary file (it has NUL bytes): not read; move it out of the store")]
            )
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = f"byte {exc.start:,}"
            if strict:
                self._report(path, [Problem(1, f"not UTF-8 text ({where}): not read; save it as UTF-8")])
                return None
            self._report(path, [Problem(1, f"not UTF-8 text ({where}): read with U+FFFD in place")])
            return data.decode("utf-8", errors="replace")

    def _report(self, path: Path, problems: tuple[Problem, ...] | list[Problem]) -> None:
        for problem in problems:
            rel = str(path.relative_to(self.root))
            self.problems.append(FileProblem(rel, problem.line, problem.message, problem.torn))
            log.warning("%s:%d: %s (skipped)", rel, problem.line, problem.message)

    def _load_note(self, path: Path, rel: Path, state: State, memo: YamlMemo) -> None:
        default_id = "nte_h" + hashlib.sha256(str(rel).encode()).hexdigest()[:25]
        text = self._read_text(path, strict=True)
        if text is None:
            return
        try:
            note = notefile.parse_note(text, default_id, memo.load)
        except Exception as exc:
            self._report(path, [Problem(1, f"unreadable note: {exc}")])
            return
        if note.id in self.notes:
            self._report(path, [Problem(1, f"note id {note.id} is already used by another file")])
            return
        if note.unread is not None:
            why = f"{note.unread}; the note is kept as it is and indexed by its text alone"
            self._report(path, [Problem(1, why)])
        if state is State.ARCHIVED:  # the banner travels with cold content, whoever moved it
            note = cold.bannered(note)
        self.notes[note.id] = NoteRecord(note, rel, state)
        if state is State.LIVE:
            self.note_by_content.setdefault(content_key(note.scope, note.body), note.id)

    def _load_log(self, path: Path, rel: Path, state: State, copies: dict[str, list[LogRecord]]) -> None:
        text = self._read_text(path)
        if text is None:
            return
        entries, problems = daylog.parse_daylog(text)
        self._report(path, problems)
        try:
            year, month, day = (int(part) for part in (*rel.parts[:-1], rel.stem))
            when = date(year, month, day)
        except ValueError:
            self._report(path, [Problem(1, "a log file must be logs/YYYY/MM/DD.md")])
            return
        for entry in entries:
            copies.setdefault(entry.id, []).append(LogRecord(entry, when, state))

    def _one_copy(self, found: list[LogRecord], current: State) -> LogRecord:
        """The one copy of a log entry to keep (see docs/store-format.md, "Moving a log entry").

        Moving an entry appends it to the other state's day file, rewrites the file it left, then
        appends the ledger event. A crash between the two file writes leaves a copy in both: the
        ledger has not recorded the move, so the copy in the state it names is kept and the other
        one is taken out of its file (only when the two copies are the same entry, word for word).
        """
        if len(found) == 1:
            return found[0]
        keep = next((r for r in found if r.state is current), found[0])
        for other in found:
            if other is keep:
                continue
            path = self.log_file(other.day, other.state)
            if other.entry != keep.entry or other.day != keep.day:
                self._report(path, [Problem(1, f"log entry {keep.entry.id} is also in another day file")])
                continue
            try:
                original = path.read_bytes().decode("utf-8")
                fsio.write_atomic(path, daylog.remove_entry(original, keep.entry.id).encode())
            except (OSError, UnicodeDecodeError) as exc:
                self._report(path, [Problem(1, f"could not remove a second copy of {keep.entry.id}: {exc}")])
                continue
            log.warning(
                "%s: removed the second copy of %s left by an interrupted move (the ledger says %s)",
                path.relative_to(self.root),
                keep.entry.id,
                current.value,
            )
        return keep

    # -- writing (call with self.lock held) ----------------------------------------------------

    def _note_retirement(self, event: Event) -> None:
        """Keep :attr:`retirements`: a retire event is remembered until a restore or delete."""
        if event.kind == "retire":
            self.retirements[event.memory] = event
        elif event.kind in ("restore", "delete"):
            self.retirements.pop(event.memory, None)

    def _changed(self, memory_id: str) -> None:
        for listener in self.listeners:
            listener(memory_id)

    def append_event(self, event: Event) -> None:
        """Append one ledger event. A ``delete`` (``life:delete``) is the commit point of a deletion:
        once it is durable the memory's content is erased (:mod:`engine.store.erasure`); a crash in
        between is finished on the next load."""
        path, block = self._event_path(event)
        with durable("append to the ledger"):
            fsio.append_durable(path, block.encode())
        self._put_event(event)

    def _event_path(self, event: Event) -> tuple[Path, str]:
        path = self.root / segment_path(event.time)
        block = ledger.format_event(event)
        if not path.exists():
            block = ledger.SEGMENT_HEADER.format(month=path.stem) + block
        return path, block

    def stage_event(self, event: Event) -> Staged:
        """:meth:`append_event` of a ``store`` or ``supersede``, left to a group commit (call
        holding :attr:`staging`, then ``commits.wait`` without it)."""
        if event.kind not in ("store", "supersede"):
            raise ValueError(f"a {event.kind} event is not staged; append it under the write lock")
        path, block = self._event_path(event)
        plan = fsio.SyncPlan()
        with durable("append to the ledger"):
            fsio.append_durable(path, block.encode(), plan)
        return self.commits.stage(
            frozenset({("fact", event.memory)}),
            plan,
            lambda: self._put_event(event, announce=False),
            lambda: self._changed(event.memory),
        )

    def _put_event(self, event: Event, *, announce: bool = True) -> None:
        """Apply ``event`` to the in-memory state, then (``announce``) tell the listeners."""
        with self.view:
            self.facts.apply(event)
            self._note_retirement(event)
            if event.kind == "delete":
                self.deleted[event.memory] = event
                self._erase(event.memory, event.event_id)
            elif event.kind in ("store", "supersede"):
                self.deleted.pop(event.memory, None)  # the same fact, said again after its deletion
        if announce:
            self._changed(event.memory)

    def _erase(self, memory: str, before: str) -> None:
        """Remove ``memory``'s content (:mod:`engine.store.erasure`); ``before`` is its ``delete``
        event's id (ledger blocks about it with an earlier id go)."""
        note = self.notes.pop(memory, None)
        if note is not None:
            key = content_key(note.note.scope, note.note.body)
            if self.note_by_content.get(key) == memory:
                del self.note_by_content[key]
            erasure.erase_note(self.note_path(note))
        entry = self.logs.pop(memory, None)
        if entry is not None:
            day_files = [self.log_file(entry.day, state) for state in (State.LIVE, State.RETIRED)]
            erasure.erase_log_entry(memory, day_files)
        erasure.erase_ledger_blocks(self.root / FACTS, memory, before)

    def note_path(self, record: NoteRecord) -> Path:
        return self.root / _NOTE_ROOTS[record.state] / record.rel

    def save_note(self, note: Note, rel: Path) -> NoteRecord:
        record = NoteRecord(note, rel, State.LIVE)
        with durable("write the note"):
            fsio.write_atomic(self.note_path(record), notefile.format_note(note).encode())
        self._put_note(record)
        return record

    def stage_note(self, note: Note, rel: Path) -> tuple[NoteRecord, Staged]:
        """:meth:`save_note` left to a group commit: the note is written to a temporary file, which
        the commit fsyncs before renaming it into place (call holding :attr:`staging`)."""
        record = NoteRecord(note, rel, State.LIVE)
        plan = fsio.SyncPlan()
        with durable("write the note"):
            fsio.write_atomic(self.note_path(record), notefile.format_note(note).encode(), plan)
        key = ("note", content_key(note.scope, note.body))
        staged = self.commits.stage(
            frozenset({key}),
            plan,
            lambda: self._put_note(record, announce=False),
            lambda: self._changed(note.id),
        )
        return record, staged

    def _put_note(self, record: NoteRecord, *, announce: bool = True) -> None:
        note = record.note
        with self.view:
            self.notes[note.id] = record
            self.note_by_content.setdefault(content_key(note.scope, note.body), note.id)
        if announce:
            self._changed(note.id)

    def move_note(self, note_id: str, state: State) -> NoteRecord:
        record = self.notes[note_id]
        note = cold.bannered(record.note) if state is State.ARCHIVED else record.note
        moved = NoteRecord(note, record.rel, state)
        with durable("move the note"):
            fsio.move_durable(self.note_path(record), self.note_path(moved))
        with self.view:
            self.notes[note_id] = moved
            key = content_key(record.note.scope, record.note.body)
            if state is State.LIVE:
                self.note_by_content.setdefault(key, note_id)
            elif self.note_by_content.get(key) == note_id:
                del self.note_by_content[key]
        self._changed(note_id)
        return moved

    def rewrite_note(self, note: Note, state: State | None = None) -> NoteRecord:
        """Write a note's new frontmatter or body, in place or (``state``) into another state's folder.

        The new file is written durably before the old one is removed: a crash in between leaves
        two copies, never none (the one in ``notes/`` loads; the other is reported).
        """
        record = self.notes[note.id]
        if record.note.unread is not None or note.unread is not None:
            raise KeptAsIs(
                f"{self.note_path(record).relative_to(self.root)} is kept as it is ("
                f"{record.note.unread or note.unread}); fix its frontmatter by hand, then try again"
            )
        moved = NoteRecord(note, record.rel, record.state if state is None else state)
        old_path, new_path = self.note_path(record), self.note_path(moved)
        with durable("rewrite the note"):
            fsio.write_atomic(new_path, notefile.format_note(note).encode())
            if new_path != old_path:
                old_path.unlink(missing_ok=True)
                fsio.fsync_dir(old_path.parent)
        with self.view:
            self.notes[note.id] = moved
            old_key = content_key(record.note.scope, record.note.body)
            if self.note_by_content.get(old_key) == note.id:
                del self.note_by_content[old_key]
            if moved.state is State.LIVE:
                self.note_by_content.setdefault(content_key(note.scope, note.body), note.id)
        self._changed(note.id)
        return moved

    def log_file(self, day: date, state: State) -> Path:
        return self.root / _LOG_ROOTS[state] / day_path(day)

    def _write_log_entry(
        self, entry: LogEntry, day: date, state: State, plan: fsio.SyncPlan | None = None
    ) -> None:
        path = self.log_file(day, state)
        text = daylog.format_entry(entry)
        if not path.exists():
            text = daylog.day_title(day) + text
        with durable("append to the day log"):
            fsio.append_durable(path, text.encode(), plan)

    def append_log(self, entry: LogEntry, day: date, state: State = State.LIVE) -> LogRecord:
        self._write_log_entry(entry, day, state)
        record = LogRecord(entry, day, state)
        self._put_log(record)
        return record

    def stage_log(self, entry: LogEntry, day: date) -> tuple[LogRecord, Staged]:
        """:meth:`append_log` of a new live entry, left to a group commit (call holding :attr:`staging`)."""
        plan = fsio.SyncPlan()
        self._write_log_entry(entry, day, State.LIVE, plan)
        record = LogRecord(entry, day, State.LIVE)
        staged = self.commits.stage(
            frozenset(), plan, lambda: self._put_log(record, announce=False), lambda: self._changed(entry.id)
        )
        return record, staged

    def _put_log(self, record: LogRecord, *, announce: bool = True) -> None:
        with self.view:
            self.logs[record.entry.id] = record
        if announce:
            self._changed(record.entry.id)

    def move_log(self, entry_id: str, state: State) -> LogRecord:
        """Copy the entry into the other state's day file, then take it out of this one."""
        record = self.logs[entry_id]
        source = self.log_file(record.day, record.state)
        self._write_log_entry(record.entry, record.day, state)
        with durable("rewrite the day log"):
            fsio.write_atomic(source, daylog.remove_entry(self._read(source), entry_id).encode())
        moved = LogRecord(record.entry, record.day, state)
        with self.view:
            self.logs[entry_id] = moved
        self._changed(entry_id)  # once, after both files are written
        return moved

    def remembered_at(self) -> datetime | None:
        """The newest time anything in the store was written (for status)."""
        times = [r.entry.time for r in self.logs.values()]
        times += [r.note.created for r in self.notes.values() if r.note.created is not None]
        times += [v.valid_from for rec in self.facts.records.values() for v in rec.values]
        return max(times, default=None)
