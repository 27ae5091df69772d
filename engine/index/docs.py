"""What the index holds for each memory, as pure functions of the store's catalog.

A note or log entry becomes one or more :class:`ChunkDoc` rows; a fact becomes one
:class:`FactDoc` (its current value). Besides the words themselves each chunk carries the
*context* that recall uses (see docs/recall.md):

- ``context``: the text of its neighbours — the chunks written just before and after it in the
  same *stream* (same source and scope, close in time; or the adjacent chunks of a long note);
- ``dates``: its days as searchable words ("8 May 2023 May 2023 2023-05-08"): when it was
  written, and every day its words name ("on 8 May 2023", "yesterday"; :mod:`.mentions`);
- ``speaker``: who it is by or about — the first name its words mention, wherever it stands
  ("Caroline: …", "On 8 May, Caroline said …"), else the memory's source;
- ``names``: every name its words mention;
- ``group``: the stream's day it belongs to (a session) — a date it states up front, else the
  day it was written — scored as a whole at query time.

Nothing here does I/O; :mod:`engine.index.db` stores what these functions return.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta

from engine.index.mentions import names, stated_day, subject, written_days
from engine.store.facts import FactRecord
from engine.store.model import State, format_time
from engine.store.workspace import LogRecord, NoteRecord

#: A chunk is cut near this many characters (paragraph, then sentence, then word boundaries).
CHUNK_TARGET = 800
#: Two memories of one stream are neighbours only if written at most this far apart.
NEIGHBOUR_WINDOW = timedelta(hours=6)
#: How much of a neighbour's text goes into a chunk's context (and into its embedded text).
CONTEXT_CHARS = 400

_WIKILINK = re.compile(r"\[\[([^\[\]|#\n]{1,200})(?:[#|][^\[\]\n]*)?\]\]")
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


@dataclass(frozen=True)
class Item:
    """A note or log entry as the index sees it (state retired never reaches the index)."""

    id: str
    kind: str  # note | log
    text: str
    created: datetime | None
    state: str  # live | archived
    scope: str | None
    source: str | None
    tags: tuple[str, ...]
    importance: float | None
    name: str  # what a [[wikilink]] may call it: the file's stem (or the id)

    @property
    def stream(self) -> str:
        return f"{self.source or ''}\x1f{self.scope or ''}"


@dataclass(frozen=True)
class ChunkDoc:
    """A row of ``chunks`` (its fields are the table's columns: :mod:`engine.index.schema`)."""

    memory: str  # nte_… / log_…
    chunk: int  # 0, 1, … within the memory
    kind: str  # note | log
    state: str  # live | archived (retired memories are not indexed)
    scope: str | None
    source: str | None
    speaker: str
    created: str | None
    grp: str  # the session (stream + day) it belongs to; '' for none
    importance: float | None
    name: str  # what a [[wikilink]] calls it (case-folded file stem)
    text: str
    context: str  # neighbours' text
    dates: str  # the time as words
    tags: str
    parts: int  # how many chunks the memory has
    embed_text: str  # what is embedded: previous / text / next
    names: str  # the names its words mention, space-separated; the first is its subject

    @property
    def hash(self) -> str:
        return digest(*(_part(getattr(self, f.name)) for f in fields(self)))


@dataclass(frozen=True)
class FactDoc:
    """A row of ``facts``: a live fact's current value."""

    memory: str  # fct_…
    subject: str
    predicate: str
    object: str
    statement: str
    subject_key: str
    predicate_key: str
    scope: str | None
    source: str | None
    created: str

    @property
    def text(self) -> str:
        head = f"{self.subject} {self.predicate}: {self.object}"
        return head if not self.statement else f"{head}. {self.statement}"

    @property
    def hash(self) -> str:
        return digest(self.memory, self.text, self.scope or "", self.source or "", self.created)


def fact_doc(record: FactRecord) -> FactDoc | None:
    """The row of a fact's current value (none for a retired fact or one with no current value)."""
    value = record.current
    if record.retired or value is None:
        return None
    return FactDoc(
        memory=record.fact_id,
        subject=value.subject,
        predicate=value.predicate,
        object=value.object,
        statement=value.statement or "",
        subject_key=record.subject_key,
        predicate_key=record.predicate_key,
        scope=record.scope,
        source=None if value.source is None else value.source.name,
        created=format_time(value.valid_from),
    )


def _part(value: object) -> str:
    """A field as hashed (None → "", a float by its repr)."""
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def note_item(record: NoteRecord) -> Item | None:
    if record.state is State.RETIRED:
        return None
    note = record.note
    return Item(
        id=note.id,
        kind="note",
        text=note.body,
        created=note.created,
        state=record.state.value,
        scope=note.scope,
        source=None if note.source is None else note.source.name,
        tags=note.tags,
        importance=note.importance,
        name=link_key(record.rel.stem),
    )


def log_item(record: LogRecord) -> Item | None:
    if record.state is State.RETIRED:
        return None
    entry = record.entry
    return Item(
        id=entry.id,
        kind="log",
        text=entry.text,
        created=entry.time,
        state=record.state.value,
        scope=entry.scope,
        source=None if entry.source is None else entry.source.name,
        tags=(),
        importance=None,
        name=entry.id,
    )


def speaker_of(text: str, source: str | None) -> str:
    """Who a chunk is by or about: the first name its words mention (wherever it stands), else
    the memory's source."""
    return subject(text) or source or ""


def day_words(day: date) -> str:
    """``8 May 2023 May 2023 2023-05-08``: how people name a day."""
    month = _MONTHS[day.month - 1]
    return f"{day.day} {month} {day.year} {month} {day.year} {day.isoformat()}"


def date_words(moment: datetime | None, text: str = "", carried: date | None = None) -> str:
    """The days a memory is about, as words: the day it was written (UTC), the day it carries
    from a dated entry before it (:func:`carried_day`) and every day its text names (absolute,
    or relative to when it was written)."""
    days = [] if moment is None else [moment.date()]
    days += [] if carried is None else [carried]
    days += [d for d, _ in written_days(text, moment)]
    return " ".join(day_words(d) for d in dict.fromkeys(days))


def same_sitting(a: Item, b: Item) -> bool:
    """Whether two memories of a stream were written close enough to be one sitting."""
    if a.created is None or b.created is None:
        return False
    return abs(a.created - b.created) <= NEIGHBOUR_WINDOW


def carried_day(item: Item, before: Item | None, before_day: date | None) -> date | None:
    """The day ``item`` is about: the date it states up front, else the day of the memory just
    before it in its stream (``before_day``) if that one was written in the same sitting — an
    entry dated once goes on for the undated memories written after it — else None."""
    stated = stated_day(item.text, item.created)
    if stated is not None:
        return stated
    return before_day if before is not None and same_sitting(item, before) else None


def stream_days(members: Sequence[Item]) -> list[date | None]:
    """:func:`carried_day` for every memory of a stream, in write order."""
    out: list[date | None] = []
    for i, item in enumerate(members):
        out.append(carried_day(item, members[i - 1] if i else None, out[-1] if i else None))
    return out


def day_of(item: Item, day: date | None = None) -> date | None:
    """The day a memory belongs to: the day it is about (``day``, :func:`carried_day`), else the
    UTC day it was written."""
    if day is not None:
        return day
    return None if item.created is None else item.created.date()


def group_of(item: Item, day: date | None = None) -> str:
    """The memory's session: its stream's day (:func:`day_of`; "" when it has none)."""
    found = day_of(item, day)
    return "" if found is None else f"{item.stream}\x1f{found.isoformat()}"


def wikilinks(text: str) -> tuple[str, ...]:
    """The normalised targets of ``[[target]]``, ``[[target|label]]`` and ``[[target#heading]]``."""
    found = dict.fromkeys(link_key(m.group(1)) for m in _WIKILINK.finditer(text))
    return tuple(k for k in found if k)


def link_key(name: str) -> str:
    name = name.strip()
    if name.lower().endswith(".md"):
        name = name[:-3]
    return " ".join(name.rsplit("/", 1)[-1].split()).casefold()


def _split(text: str, pattern: re.Pattern[str], joiner: str, target: int) -> list[str]:
    out: list[str] = []
    current = ""
    for piece in (p.strip() for p in pattern.split(text)):
        if not piece:
            continue
        if current and len(current) + len(piece) + len(joiner) > target:
            out.append(current)
            current = piece
        else:
            current = f"{current}{joiner}{piece}" if current else piece
    if current:
        out.append(current)
    return out


def chunk_text(text: str, target: int = CHUNK_TARGET) -> list[str]:
    """``text`` cut into pieces of about ``target`` characters, on the largest boundary that works."""
    text = text.strip()
    if len(text) <= target * 5 // 4:
        return [text] if text else [""]
    out: list[str] = []
    for para in _split(text, _PARAGRAPH, "\n\n", target):
        if len(para) <= target * 5 // 4:
            out.append(para)
            continue
        for sentence in _split(para, _SENTENCE, " ", target):
            out.extend(_cut_words(sentence, target))
    return out


def _cut_words(text: str, target: int) -> list[str]:
    """A sentence too long for one chunk, cut at spaces (or hard at ``target``) in one pass.

    Walks an index through the text instead of re-slicing what is left after every cut, so the
    work is linear in the text's length (a 50 MB note without breaks used to take minutes).
    """
    out: list[str] = []
    start, end = 0, len(text)
    while end - start > target * 5 // 4:
        cut = text.rfind(" ", start + target // 2, start + target)
        cut = start + target if cut < 0 else cut
        piece = text[start:cut].strip()
        if piece:
            out.append(piece)
        start = cut
        while start < end and text[start].isspace():
            start += 1
    rest = text[start:end].strip()
    if rest:
        out.append(rest)
    return out


def _clip(text: str, limit: int = CONTEXT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit]


def neighbours(item: Item, other: Item | None, mine: date | None = None, theirs: date | None = None) -> bool:
    """Whether ``other`` (before or after ``item`` in its stream) is close enough to be context;
    ``mine`` and ``theirs`` are the days they are about (:func:`carried_day`)."""
    if other is None or not same_sitting(item, other):
        return False
    return mine is None or theirs is None or mine == theirs  # entries about other days are not


Days = tuple[date | None, date | None, date | None]


def _own_day(item: Item | None) -> date | None:
    return None if item is None else stated_day(item.text, item.created)


def item_docs(
    item: Item, before: Item | None, after: Item | None, days: Days | None = None
) -> list[ChunkDoc]:
    """The chunk rows of ``item``, given the memories just before and after it in its stream and
    the days the three are about (:func:`carried_day`; by default each one's own stated day)."""
    day_before, day, day_after = days or (_own_day(before), _own_day(item), _own_day(after))
    pieces = chunk_text(item.text)
    prev_text = (
        _clip(chunk_text(before.text)[-1][-CONTEXT_CHARS:])
        if before and neighbours(item, before, day, day_before)
        else ""
    )
    next_text = (
        _clip(chunk_text(after.text)[0])
        if after is not None and neighbours(item, after, day, day_after)
        else ""
    )
    carried = day if day is not None and stated_day(item.text, item.created) is None else None
    speaker = speaker_of(item.text, item.source)
    created = None if item.created is None else format_time(item.created)
    docs: list[ChunkDoc] = []
    for i, piece in enumerate(pieces):
        left = _clip(pieces[i - 1][-CONTEXT_CHARS:]) if i > 0 else prev_text
        right = _clip(pieces[i + 1]) if i + 1 < len(pieces) else next_text
        docs.append(
            ChunkDoc(
                memory=item.id,
                chunk=i,
                kind=item.kind,
                state=item.state,
                scope=item.scope,
                source=item.source,
                speaker=speaker if i == 0 else speaker_of(piece, item.source),
                created=created,
                grp=group_of(item, day),
                importance=item.importance,
                name=item.name,
                text=piece,
                context="\n".join(t for t in (left, right) if t),
                dates=date_words(item.created, piece, carried),
                names=" ".join(names(piece)),
                tags="\n".join(item.tags),
                parts=len(pieces),
                embed_text="\n".join(t for t in (left, piece, right) if t),
            )
        )
    return docs


def order_key(item: Item) -> tuple[str, str]:
    return ("" if item.created is None else format_time(item.created), item.id)


def streams(items: Iterable[Item]) -> dict[str, list[Item]]:
    """Items grouped by stream, each stream in write order (time, then id: ids are time-sortable)."""
    out: dict[str, list[Item]] = {}
    for item in items:
        out.setdefault(item.stream, []).append(item)
    for members in out.values():
        members.sort(key=order_key)
    return out


def around(
    members: Sequence[Item], days: Sequence[date | None], i: int
) -> tuple[Item | None, Item | None, Days]:
    """The memories before and after ``members[i]`` and the days of the three (``days``:
    :func:`stream_days`), as :func:`item_docs` takes them."""
    before = members[i - 1] if i > 0 else None
    after = members[i + 1] if i + 1 < len(members) else None
    return before, after, (days[i - 1] if i > 0 else None, days[i], days[i + 1] if after else None)


def all_docs(items: Sequence[Item]) -> list[ChunkDoc]:
    """Every chunk row of ``items`` (the whole index's chunk side), in a stable order."""
    docs: list[ChunkDoc] = []
    for members in streams(items).values():
        days = stream_days(members)
        for i, item in enumerate(members):
            docs.extend(item_docs(item, *around(members, days, i)))
    docs.sort(key=lambda d: (d.memory, d.chunk))
    return docs
