"""Facts as the ledger makes them: values with validity, retirement, and the write decision.

``FactTable`` replays events in ledger order; every question about facts (what is current,
what was current at T, what would a new value do) is answered from it alone, so ``validTo``
is always derivable from the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from engine.store.ids import fact_id
from engine.store.model import Event, Source
from engine.store.text import normalize_key


@dataclass(frozen=True)
class FactValue:
    fact_id: str
    event_id: str
    subject: str
    predicate: str
    object: str
    scope: str | None
    statement: str | None
    source: Source | None
    valid_from: datetime
    valid_to: datetime | None = None
    closed_by: str | None = None


@dataclass
class FactRecord:
    fact_id: str
    subject_key: str
    predicate_key: str
    scope: str | None
    values: list[FactValue] = field(default_factory=list)
    retired: bool = False
    retired_reason: str | None = None

    @property
    def current(self) -> FactValue | None:
        if self.values and self.values[-1].valid_to is None:
            return self.values[-1]
        return None

    def at(self, moment: datetime) -> FactValue | None:
        for value in reversed(self.values):
            if value.valid_from <= moment and (value.valid_to is None or value.valid_to > moment):
                return value
        return None


Action = Literal["store", "supersede", "nochange"]


@dataclass(frozen=True)
class Duplicate:
    id: str
    subject: str
    predicate: str
    object: str
    scope: str | None
    why: str


def _one_word_apart(a: list[str], b: list[str]) -> bool:
    if abs(len(a) - len(b)) != 1:
        return False
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


class FactTable:
    def __init__(self) -> None:
        self.records: dict[str, FactRecord] = {}
        self._by_predicate: dict[str, set[str]] = {}

    def key_of(self, subject: str, predicate: str, scope: str | None) -> str:
        return fact_id(normalize_key(subject), normalize_key(predicate), scope)

    def apply(self, event: Event) -> None:
        if event.kind in ("store", "supersede"):
            assert event.subject is not None and event.predicate is not None and event.object is not None
            record = self.records.get(event.memory)
            if record is None:
                record = FactRecord(
                    event.memory, normalize_key(event.subject), normalize_key(event.predicate), event.scope
                )
                self.records[event.memory] = record
                self._by_predicate.setdefault(record.predicate_key, set()).add(event.memory)
            open_value = record.current
            if open_value is not None:
                record.values[-1] = replace(open_value, valid_to=event.time, closed_by=event.event_id)
            record.values.append(
                FactValue(
                    fact_id=event.memory,
                    event_id=event.event_id,
                    subject=event.subject,
                    predicate=event.predicate,
                    object=event.object,
                    scope=event.scope,
                    statement=event.statement,
                    source=event.source,
                    valid_from=event.time,
                )
            )
            record.retired = False
            record.retired_reason = None
        elif event.kind == "delete":
            gone = self.records.pop(event.memory, None)
            if gone is not None:
                self._by_predicate.get(gone.predicate_key, set()).discard(event.memory)
        elif event.memory in self.records:
            record = self.records[event.memory]
            record.retired = event.kind == "retire"
            record.retired_reason = event.reason if record.retired else None

    def decide(self, fid: str, obj: str) -> tuple[Action, FactValue | None]:
        """What saving ``obj`` for fact ``fid`` does: the action and the value it would close."""
        record = self.records.get(fid)
        current = None if record is None else record.current
        if record is None or current is None or record.retired:
            return "store", None
        if normalize_key(current.object) == normalize_key(obj):
            return "nochange", current
        return "supersede", current

    def possible_duplicates(
        self, fid: str, subject: str, predicate: str, scope: str | None
    ) -> list[Duplicate]:
        subject_words = normalize_key(subject).split(" ")
        predicate_key = normalize_key(predicate)
        out: list[Duplicate] = []
        for other_id in sorted(self._by_predicate.get(predicate_key, ())):
            record = self.records[other_id]
            current = record.current
            if other_id == fid or current is None or record.retired:
                continue
            if record.subject_key == normalize_key(subject) and record.scope != scope:
                why = f"the same subject and predicate exist in scope {record.scope or '(none)'}"
            elif record.scope == scope and _one_word_apart(subject_words, record.subject_key.split(" ")):
                why = f"subject {current.subject!r} is one word longer or shorter"
            else:
                continue
            out.append(
                Duplicate(other_id, current.subject, current.predicate, current.object, record.scope, why)
            )
        return out
