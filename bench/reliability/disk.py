"""Read a workspace's Markdown store straight from disk, independently of the engine's own parser.

Only what the reliability checks need: which ledger events exist (and how often), which note files
hold which ids, and which day-log files hold which log entries. The formats are
``docs/store-format.md``'s; this reader is deliberately small and strict, so a store the engine
would misread still shows up here as a duplicate or a missing id.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_EVENT = re.compile(r"^## (evt_[0-9A-Z]{26}) (\w+)\s*$", re.MULTILINE)
_BLOCK = re.compile(r"```yaml\n(.*?)\n```", re.DOTALL)
_LOG_ENTRY = re.compile(r"^- (\S+) (log_[0-9A-Z]{26}) (\{.*\})\s*$", re.MULTILINE)
_NOTE_ID = re.compile(r"^id: (nte_[0-9A-Z]{26})\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Event:
    id: str
    kind: str
    fields: dict[str, Any]


@dataclass
class Store:
    """What is on disk: every occurrence is kept, so duplicates can be counted."""

    events: dict[str, list[Event]] = field(default_factory=lambda: defaultdict(list))
    notes: dict[str, list[Path]] = field(default_factory=lambda: defaultdict(list))
    logs: dict[str, list[Path]] = field(default_factory=lambda: defaultdict(list))
    note_text: dict[Path, str] = field(default_factory=dict)
    log_text: dict[str, str] = field(default_factory=dict)
    log_at: dict[str, tuple[Path, int]] = field(default_factory=dict)  # where an entry is: file, position

    def event_kinds(self) -> Counter[str]:
        return Counter(e.kind for found in self.events.values() for e in found)


def _ledger(store: Store, path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    heads = list(_EVENT.finditer(text))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        block = _BLOCK.search(text, head.end(), end)
        if block is None:
            continue  # a torn tail: the engine ignores it too
        try:
            fields = yaml.safe_load(block.group(1))
        except yaml.YAMLError:
            continue
        if isinstance(fields, dict):
            store.events[head.group(1)].append(Event(head.group(1), head.group(2), fields))


def _day_log(store: Store, path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    entries = list(_LOG_ENTRY.finditer(text))
    for i, entry in enumerate(entries):
        end = entries[i + 1].start() if i + 1 < len(entries) else len(text)
        body = text[entry.end() : end].strip("\n")
        store.logs[entry.group(2)].append(path)
        store.log_at[entry.group(2)] = (path, i)
        store.log_text[entry.group(2)] = "\n".join(line.removeprefix("  ") for line in body.splitlines())


def _note(store: Store, path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---\n"):
        return
    front, _, body = text[4:].partition("\n---\n")
    found = _NOTE_ID.search(front + "\n")
    if found is not None:
        store.notes[found.group(1)].append(path)
        store.note_text[path] = body


def scan(root: Path) -> Store:
    """Every ledger event, note and log entry under a workspace directory."""
    store = Store()
    for path in sorted((root / "facts").glob("*.md")):
        _ledger(store, path)
    for top in ("logs", "retired/logs"):
        for path in sorted((root / top).rglob("*.md")):
            _day_log(store, path)
    for top in ("notes", "archive", "retired/notes"):
        for path in sorted((root / top).rglob("*.md")):
            _note(store, path)
    return store


def is_retired(root: Path, path: Path) -> bool:
    return path.relative_to(root).parts[0] == "retired"
