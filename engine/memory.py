"""What the MCP tools do: validate, decide, write durably, answer (one writer per workspace).

Every public method takes the :class:`Caller` (who is asking, from the gateway's identity
headers or the local client) and either returns a result or raises an
:class:`~engine.errors.EngineError` having written nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from engine.errors import Forbidden, InvalidInput, NotFound, NotRetired, ReadOnly, TooLong
from engine.results import Closed, FactOut, Receipt, Retrieved, fact_out, log_out, note_out
from engine.scope import Caller, changeable, read_scope, visible, within, write_scope
from engine.store import ids, layout
from engine.store.cold import without_banner
from engine.store.facts import FactRecord
from engine.store.model import Event, EventKind, LogEntry, Note, Source, State, format_time, utc_now
from engine.store.text import (
    MAX_KEY,
    MAX_OBJECT,
    MAX_REASON,
    MAX_SOURCE,
    check_importance,
    check_tags,
    check_text,
    normalize_key,
    parse_day,
    parse_when,
)
from engine.store.workspace import NoteRecord, Workspace, content_key

UNKNOWN_SOURCE = "unknown client"


class Memory:
    def __init__(
        self,
        workspace: Workspace,
        clock: Callable[[], datetime] = utc_now,
        on_save: Callable[[], None] | None = None,
    ) -> None:
        self.ws = workspace
        self.clock = clock
        self.on_save = on_save  # after a new memory is written: the archive sweep (life:archive)
        self._ulids = ids.UlidClock()

    def _saved(self, receipt: Receipt) -> Receipt:
        if self.on_save is not None and receipt.action != "nochange":
            self.on_save()
        return receipt

    # -- helpers -------------------------------------------------------------------------------

    def _new_id(self, prefix: str, now: datetime) -> str:
        return f"{prefix}_{self._ulids.ulid(now)}"

    @staticmethod
    def _writable(caller: Caller) -> None:
        if caller.read_only:
            raise ReadOnly(
                "this connection is read-only: it can read memories but not save, retire or restore them "
                "(ask the owner for a connection with write access)"
            )

    @staticmethod
    def _source(caller: Caller, source: str | None) -> Source:
        """The connection's name; else the source given, which is checked even when unused (a bad
        argument is refused, never silently dropped)."""
        given = None if source is None else check_text("source", source, limit=MAX_SOURCE, single_line=True)
        if caller.connection:
            return Source(caller.connection, verified=True)
        if given is not None:
            return Source(given.strip())
        return Source(caller.client_name or UNKNOWN_SOURCE)

    # -- writes --------------------------------------------------------------------------------

    def remember(
        self,
        caller: Caller,
        statement: str,
        subject: str | None = None,
        predicate: str | None = None,
        object: str | None = None,
        scope: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        source: str | None = None,
    ) -> Receipt:
        self._writable(caller)
        check_text("statement", statement)
        parts = {"subject": subject, "predicate": predicate, "object": object}
        given = [name for name, value in parts.items() if value is not None]
        if given and len(given) < 3:
            missing = ", ".join(name for name in parts if parts[name] is None)
            raise InvalidInput(
                f"a fact needs subject, predicate and object together; missing: {missing}. "
                "Pass all three to save a fact, or none to save a note."
            )
        if given:
            assert subject is not None and predicate is not None and object is not None
            return self.save_memory(caller, subject, predicate, object, statement, scope, source)
        scope = write_scope(caller, scope)
        tag_tuple = check_tags(tags)
        importance = check_importance(importance)
        who = self._source(caller, source)
        key = content_key(scope, statement)
        with self.ws.staging:  # not the draining lock: see engine.store.commit
            if self.ws.commits.pending(("note", key)):
                self.ws.commits.drain(index=False)  # the same text is being saved: decide after it
            existing = self.ws.note_by_content.get(key)
            if existing is not None:
                record = self.ws.notes[existing]
                return self._note_receipt("nochange", record)
            now = self.clock()
            note_id = self._new_id(ids.NOTE, now)
            rel = layout.note_path(now, note_id)
            note = Note(
                id=note_id,
                body=statement,
                created=now,
                importance=importance,
                tags=tag_tuple,
                scope=scope,
                source=who,
            )
            record, staged = self.ws.stage_note(note, rel)
            receipt = self._note_receipt("store", record)
        self.ws.commits.wait(staged)  # acknowledged once durable
        return self._saved(receipt)

    def _note_receipt(self, action: str, record: NoteRecord) -> Receipt:
        note = record.note
        return Receipt(
            action=action,
            event_id=ids.event_id_for(note.id),
            id=note.id,
            kind="note",
            scope=note.scope,
            source=None if note.source is None else note.source.name,
            source_verified=note.source is not None and note.source.verified,
            path=str(self.ws.note_path(record).relative_to(self.ws.root)),
        )

    def save_memory(
        self,
        caller: Caller,
        subject: str,
        predicate: str,
        object: str,
        statement: str | None = None,
        scope: str | None = None,
        source: str | None = None,
    ) -> Receipt:
        self._writable(caller)
        check_text("subject", subject, limit=MAX_KEY, single_line=True)
        check_text("predicate", predicate, limit=MAX_KEY, single_line=True)
        check_text("object", object, limit=MAX_OBJECT, single_line=True)
        if statement is not None:
            check_text("statement", statement)
        scope = write_scope(caller, scope)
        who = self._source(caller, source)
        subject, predicate, object = subject.strip(), predicate.strip(), object.strip()
        with self.ws.staging:  # not the draining lock: see engine.store.commit
            fid = self.ws.facts.key_of(subject, predicate, scope)
            if self.ws.commits.pending(("fact", fid)):
                self.ws.commits.drain(index=False)  # the same fact is being saved: decide after it
            action, previous = self.ws.facts.decide(fid, object)
            duplicates = self.ws.facts.possible_duplicates(fid, subject, predicate, scope)
            if action == "nochange":
                assert previous is not None
                return Receipt(
                    "nochange",
                    previous.event_id,
                    fid,
                    "fact",
                    scope,
                    who.name,
                    who.verified,
                    possible_duplicates=duplicates,
                )
            now = self.clock()
            event = Event(
                event_id=self._new_id(ids.EVENT, now),
                kind=action,
                time=now,
                memory=fid,
                subject=subject,
                predicate=predicate,
                object=object,
                scope=scope,
                statement=statement,
                source=who,
                closes=None if previous is None else previous.event_id,
            )
            staged = self.ws.stage_event(event)
            closed = None
            if previous is not None:
                closed = Closed(
                    previous.object, previous.event_id, format_time(previous.valid_from), format_time(now)
                )
            receipt = Receipt(
                action, event.event_id, fid, "fact", scope, who.name, who.verified, closed, duplicates
            )
        self.ws.commits.wait(staged)  # acknowledged once durable
        return self._saved(receipt)

    def remember_note(
        self, caller: Caller, text: str, date: str | None = None, source: str | None = None
    ) -> Receipt:
        self._writable(caller)
        check_text("text", text)
        day = None if date is None else parse_day(date)
        scope = write_scope(caller, None)
        who = self._source(caller, source)
        with self.ws.staging:  # not the draining lock: see engine.store.commit
            now = self.clock()
            entry = LogEntry(self._new_id(ids.LOG, now), now, text.strip("\n").rstrip(), who, scope)
            record, staged = self.ws.stage_log(entry, day or now.date())
            path = self.ws.log_file(record.day, record.state).relative_to(self.ws.root)
            receipt = Receipt(
                "store",
                ids.event_id_for(entry.id),
                entry.id,
                "log",
                scope,
                who.name,
                who.verified,
                path=str(path),
            )
        self.ws.commits.wait(staged)  # acknowledged once durable
        return self._saved(receipt)

    # -- retire / restore ------------------------------------------------------------------------

    def retire(self, caller: Caller, memory_id: str, reason: str | None = None) -> Receipt:
        return self._set_retired(caller, memory_id, True, reason)

    def restore(self, caller: Caller, memory_id: str) -> Receipt:
        return self._set_retired(caller, memory_id, False, None)

    def delete(self, caller: Caller, memory_id: str) -> Receipt:
        """Delete a retired memory for good (``life:delete``; the owner's admin surface only, never a
        tool): its content leaves the store and the ledger, a ``delete`` event records who and when."""
        self._writable(caller)
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInput("id is empty: pass the id of the memory (fct_…, nte_… or log_…)")
        who = self._source(caller, None)
        with self.ws.lock:
            target = self._target(memory_id)
            if target is None or not visible(caller, target[1]):
                gone = self.ws.deleted.get(memory_id)
                if gone is not None:
                    when = format_time(gone.time)
                    raise NotFound(f"{memory_id} was already deleted permanently, at {when}")
                raise self._not_found(memory_id)
            kind, scope, state = target
            self._changeable(caller, memory_id, scope)
            if state is not State.RETIRED:
                raise NotRetired(
                    f"{memory_id} is {state.value}: only a retired memory can be deleted permanently; "
                    "retire it first"
                )
            now = self.clock()
            event = Event(self._new_id(ids.EVENT, now), "delete", now, memory_id, source=who)
            self.ws.append_event(event)
            return Receipt("delete", event.event_id, memory_id, kind, scope, who.name, who.verified)

    @staticmethod
    def _changeable(caller: Caller, memory_id: str, scope: str | None) -> None:
        """Refuse a pinned connection's retire, restore or delete outside its own scope (it may
        read unscoped memories, but they are not its to change)."""
        if not changeable(caller, scope):
            raise Forbidden(
                f"this connection is pinned to scope {caller.pinned_scope!r}: it may retire and restore "
                f"only memories of that scope, and {memory_id} is unscoped; ask the owner to change it"
            )

    def _not_found(self, memory_id: str) -> NotFound:
        return NotFound(f"no memory has the id {memory_id!r}; ids look like fct_…, nte_… or log_…")

    def _target(self, memory_id: str) -> tuple[str, str | None, State] | None:
        """(kind, scope, state) of the memory with this id, or None."""
        if memory_id in self.ws.facts.records:
            record = self.ws.facts.records[memory_id]
            return "fact", record.scope, State.RETIRED if record.retired else State.LIVE
        if memory_id in self.ws.notes:
            note = self.ws.notes[memory_id]
            return "note", note.note.scope, note.state
        if memory_id in self.ws.logs:
            entry = self.ws.logs[memory_id]
            return "log", entry.entry.scope, entry.state
        return None

    def _set_retired(self, caller: Caller, memory_id: str, retire: bool, reason: str | None) -> Receipt:
        self._writable(caller)
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise InvalidInput("id is empty: pass the id of the memory (fct_…, nte_… or log_…)")
        if reason is not None:
            check_text("reason", reason, limit=MAX_REASON)
        who = self._source(caller, None)
        action: EventKind = "retire" if retire else "restore"
        with self.ws.lock:
            target = self._target(memory_id)
            if target is None or not visible(caller, target[1]):
                raise self._not_found(memory_id)
            kind, scope, current = target
            self._changeable(caller, memory_id, scope)
            if current is (State.RETIRED if retire else State.LIVE):
                return Receipt("nochange", None, memory_id, kind, scope, who.name, who.verified)
            now = self.clock()
            event = Event(
                self._new_id(ids.EVENT, now), action, now, memory_id, scope=scope, source=who, reason=reason
            )
            state = State.RETIRED if retire else State.LIVE
            if kind == "fact":  # repeat what the fact says, for a reader of the ledger
                last = self.ws.facts.records[memory_id].values[-1]
                event = replace(event, subject=last.subject, predicate=last.predicate, object=last.object)
            elif kind == "note":
                self._move_note(memory_id, state, now)
            else:
                self.ws.move_log(memory_id, state)
            self.ws.append_event(event)
            return Receipt(action, event.event_id, memory_id, kind, scope, who.name, who.verified)

    def _move_note(self, memory_id: str, state: State, now: datetime) -> None:
        """Retire, or bring back from retired or cold storage (taking the archive banner off; a note
        restored from the archive counts as cited now, so the next sweep does not take it again)."""
        record = self.ws.notes[memory_id]
        body = without_banner(record.note.body)
        if state is State.LIVE and (body != record.note.body or record.state is State.ARCHIVED):
            cited = now if record.state is State.ARCHIVED else record.note.last_cited
            self.ws.rewrite_note(replace(record.note, body=body, last_cited=cited), State.LIVE)
        else:
            self.ws.move_note(memory_id, state)

    # -- reads ---------------------------------------------------------------------------------

    def retrieve(
        self,
        caller: Caller,
        subject: str | None = None,
        predicate: str | None = None,
        memory_id: str | None = None,
        scope: str | None = None,
        include_history: bool = False,
        as_of: str | None = None,
    ) -> Retrieved:
        limit = read_scope(caller, scope)
        moment = None if as_of is None else parse_when(as_of)
        for name, value in (("subject", subject), ("predicate", predicate)):
            if value is not None and len(value) > MAX_KEY:
                raise TooLong(f"{name} is {len(value):,} characters; no fact's {name} is over {MAX_KEY:,}")
        if memory_id is None and subject is None and predicate is None:
            raise InvalidInput("say what to retrieve: pass a subject, a predicate, or an id")
        with self.ws.view:  # not the write lock: a read never waits for a write's fsync
            if memory_id is not None:
                return self._by_id(caller, memory_id, include_history, moment)
            subject_key = None if subject is None else normalize_key(subject)
            predicate_key = None if predicate is None else normalize_key(predicate)
            facts: list[FactOut] = []
            for record in self.ws.facts.records.values():
                if record.retired or not visible(caller, record.scope):
                    continue
                if not within(limit, record.scope):
                    continue
                if subject_key is not None and record.subject_key != subject_key:
                    continue
                if predicate_key is not None and record.predicate_key != predicate_key:
                    continue
                facts.extend(self._values(record, include_history, moment))
            facts.sort(
                key=lambda f: (f.subject.casefold(), f.predicate.casefold(), f.scope or "", not f.current)
            )
            return Retrieved(facts, [])

    def _values(self, record: FactRecord, include_history: bool, moment: datetime | None) -> list[FactOut]:
        chosen = record.at(moment) if moment is not None else record.current
        out = [] if chosen is None else [fact_out(chosen, record)]
        if include_history:
            older = [v for v in reversed(record.values) if v is not chosen]
            if moment is not None:
                older = [v for v in older if v.valid_from <= moment]
            out.extend(fact_out(v, record) for v in older)
        return out

    def _by_id(
        self, caller: Caller, memory_id: str, include_history: bool, moment: datetime | None
    ) -> Retrieved:
        record = self.ws.facts.records.get(memory_id)
        if record is not None and visible(caller, record.scope):
            return Retrieved(self._values(record, include_history, moment), [])
        note = self.ws.notes.get(memory_id)
        if note is not None and visible(caller, note.note.scope):
            path = self.ws.note_path(note).relative_to(self.ws.root)
            return Retrieved([], [note_out(note.note, note.state, str(path))])
        entry = self.ws.logs.get(memory_id)
        if entry is not None and visible(caller, entry.entry.scope):
            path = self.ws.log_file(entry.day, entry.state).relative_to(self.ws.root)
            return Retrieved([], [log_out(entry.entry, entry.state, str(path))])
        raise self._not_found(memory_id)
