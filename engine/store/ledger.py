"""The facts ledger's on-disk form: Markdown, one block per event (pure parse and serialise).

A block::

    ## evt_01JF9Z5K3W8E6Q2V4T7YB1C0DA store

    ```yaml
    time: '2026-11-30T01:23:57.123456Z'
    memory: fct_3a9f0c51d2e8b7a64c10
    subject: Fjord
    ...
    ```

A block counts only when its closing fence is there and its YAML reads; anything else (a torn
tail after a crash, a hand-mangled block) is reported as a :class:`Problem` and skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from engine.store import _yaml
from engine.store.model import EVENT_KINDS, Event, Source, format_time, parse_time

_HEADING = re.compile(r"^## (\S+)(?: +(\S+))?\s*$")
_EVENT_ID = re.compile(r"^evt_[0-9A-HJKMNP-TV-Z]{26}$")
_FENCE_OPEN = "```yaml"
_FENCE_CLOSE = "```"
VALUE_KINDS = ("store", "supersede")


@dataclass(frozen=True)
class Problem:
    """Something in a file that could not be read. ``line`` is 1-based."""

    line: int
    message: str
    torn: bool = False


@dataclass(frozen=True)
class LedgerText:
    events: tuple[Event, ...]
    problems: tuple[Problem, ...]


def format_event(event: Event) -> str:
    fields: dict[str, Any] = {"time": format_time(event.time), "memory": event.memory}
    for key in ("subject", "predicate", "object", "scope"):
        value = getattr(event, key)
        if value is not None:
            fields[key] = value
    if event.source is not None:
        fields["source"] = event.source.name
        if event.source.verified:
            fields["source-verified"] = True
    for key in ("closes", "reason", "statement"):
        value = getattr(event, key)
        if value is not None:
            fields[key] = value
    return f"## {event.event_id} {event.kind}\n\n{_FENCE_OPEN}\n{_yaml.dump(fields)}{_FENCE_CLOSE}\n\n"


def _opt_str(fields: dict[str, Any], key: str) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{key!r} must be text")
    return str(value)


def _event(event_id: str, kind: str, body: str, load: Callable[[str], Any] = _yaml.load) -> Event:
    if not _EVENT_ID.match(event_id):
        raise ValueError(f"{event_id!r} is not an event id (evt_ + 26 characters)")
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}; expected one of {', '.join(EVENT_KINDS)}")
    fields = load(body)
    if not isinstance(fields, dict):
        raise ValueError("the block's YAML is not a mapping")
    fields = cast(dict[str, Any], fields)
    memory = _opt_str(fields, "memory")
    if not memory:
        raise ValueError("the block names no 'memory'")
    source_name = _opt_str(fields, "source")
    event = Event(
        event_id=event_id,
        kind=kind,
        time=parse_time(fields.get("time")),
        memory=memory,
        subject=_opt_str(fields, "subject"),
        predicate=_opt_str(fields, "predicate"),
        object=_opt_str(fields, "object"),
        scope=_opt_str(fields, "scope"),
        statement=_opt_str(fields, "statement"),
        source=None if source_name is None else Source(source_name, fields.get("source-verified") is True),
        closes=_opt_str(fields, "closes"),
        reason=_opt_str(fields, "reason"),
    )
    if kind in VALUE_KINDS and (event.subject is None or event.predicate is None or event.object is None):
        raise ValueError(f"a {kind} event needs subject, predicate and object")
    return event


def parse_ledger(text: str, load: Callable[[str], Any] = _yaml.load) -> LedgerText:
    """The events of one ledger segment and the problems found; ``load`` parses each block's YAML."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    events: list[Event] = []
    problems: list[Problem] = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        last = n + 1 == len(starts)
        block = [line.rstrip("\r") for line in lines[start:end]]
        heading = _HEADING.match(block[0])
        try:
            if heading is None or heading.group(2) is None:
                raise ValueError("the heading is not '## evt_… <kind>'")
            opened = block.index(_FENCE_OPEN, 1)
            closed = block.index(_FENCE_CLOSE, opened + 1)
        except ValueError as exc:
            torn = last and not any(line == _FENCE_CLOSE for line in block)
            reason = "incomplete block (torn write)" if torn else str(exc) or "no closing fence"
            problems.append(Problem(start + 1, reason, torn=torn))
            continue
        try:
            events.append(
                _event(heading.group(1), heading.group(2), "\n".join(block[opened + 1 : closed]), load)
            )
        except Exception as exc:
            problems.append(Problem(start + 1, f"unreadable event block: {exc}"))
        trailing = [k for k in range(closed + 1, len(block)) if block[k].strip()]
        if trailing:
            problems.append(Problem(start + trailing[0] + 1, "text after the block (torn write?)", torn=last))
    return LedgerText(tuple(events), tuple(problems))


def erase_blocks(text: str, memory: str, before: str) -> tuple[str, int]:
    """``text`` without the blocks about ``memory`` whose event id sorts before ``before`` (the delete
    event's: ids are time-ordered ULIDs), and how many were taken out. Everything else is kept byte
    for byte, unreadable blocks included."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    drop: list[tuple[int, int]] = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        heading = _HEADING.match(lines[start].rstrip("\r"))
        if heading is None or heading.group(2) is None or not heading.group(1) < before:
            continue
        block = [line.rstrip("\r") for line in lines[start:end]]
        try:
            opened = block.index(_FENCE_OPEN, 1)
            closed = block.index(_FENCE_CLOSE, opened + 1)
            event = _event(heading.group(1), heading.group(2), "\n".join(block[opened + 1 : closed]))
        except Exception:
            continue
        if event.memory == memory:
            drop.append((start, end))
    for start, end in reversed(drop):
        del lines[start:end]
    return "\n".join(lines), len(drop)


SEGMENT_HEADER = (
    "# Facts ledger — {month}\n\n"
    "Append-only: each block below is one event (store, supersede, retire, restore, delete). "
    "See docs/store-format.md.\n\n"
)
