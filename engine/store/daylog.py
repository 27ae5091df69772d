"""Day logs (``logs/YYYY/MM/DD.md``): one Markdown list item per entry (pure parse and serialise).

An entry::

    - 2026-11-30T14:03:22.104233Z log_01JF9Z5K3W8E6Q2V4T7YB1C0DA {"source": "Claude Code"}
      The text, every line indented by two spaces.

The JSON object on the first line holds the entry's metadata (``source``, ``verified``,
``scope``); the text follows, whole.
"""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any

from engine.store.ledger import Problem
from engine.store.model import LogEntry, Source, format_time, parse_time

_HEADER = re.compile(r"^- (\S+) (log_[0-9A-HJKMNP-TV-Z]{26})(?: (\{.*\}))?\s*$")


def day_title(day: date) -> str:
    return f"# Log — {day.isoformat()}\n\n"


def format_entry(entry: LogEntry) -> str:
    meta: dict[str, Any] = {}
    if entry.source is not None:
        meta["source"] = entry.source.name
        if entry.source.verified:
            meta["verified"] = True
    if entry.scope is not None:
        meta["scope"] = entry.scope
    head = f"- {format_time(entry.time)} {entry.id}"
    if meta:
        head += " " + json.dumps(meta, ensure_ascii=False)
    body = "\n".join(("  " + line) if line else "" for line in entry.text.split("\n"))
    return f"{head}\n{body}\n\n"


def _entry(match: re.Match[str], text_lines: list[str]) -> LogEntry:
    meta: dict[str, Any] = json.loads(match.group(3)) if match.group(3) else {}
    if not isinstance(meta, dict):
        raise ValueError("the metadata after the id is not a JSON object")
    while text_lines and not text_lines[-1].strip():
        text_lines.pop()
    if not text_lines:
        raise ValueError("the entry has no text")
    source = meta.get("source")
    scope = meta.get("scope")
    return LogEntry(
        id=match.group(2),
        time=parse_time(match.group(1)),
        text="\n".join(text_lines),
        source=None if source is None else Source(str(source), meta.get("verified") is True),
        scope=None if scope is None else str(scope),
    )


def parse_daylog(text: str) -> tuple[list[LogEntry], list[Problem]]:
    entries: list[LogEntry] = []
    problems: list[Problem] = []
    current: re.Match[str] | None = None
    start = 0
    body: list[str] = []

    def close() -> None:
        if current is None:
            return
        try:
            entries.append(_entry(current, body))
        except Exception as exc:
            problems.append(Problem(start, f"unreadable log entry: {exc}"))

    in_bad_entry = False
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        continuation = line.startswith("  ") or not line.strip()
        if line.startswith("- "):
            close()
            current, body, start = _HEADER.match(line), [], number
            in_bad_entry = current is None
            if in_bad_entry:
                problems.append(Problem(number, "not a log entry header ('- <time> log_… {…}')"))
        elif continuation and current is not None:
            body.append(raw[2:])
        elif continuation and in_bad_entry:
            continue  # the lines of an entry already reported
        elif line.strip() and not line.startswith("#"):
            close()
            current, in_bad_entry = None, False
            problems.append(Problem(number, "line outside any log entry"))
    close()
    return entries, problems


def remove_entry(text: str, entry_id: str) -> str:
    """The log's text without one entry (header, its lines, and the blank line after it)."""
    lines = text.split("\n")
    out: list[str] = []
    skipping = False
    for line in lines:
        if line.startswith("- "):
            skipping = _is_header_for(line, entry_id)
        elif skipping and (line.startswith("  ") or not line.strip()):
            continue
        else:
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out)


def _is_header_for(line: str, entry_id: str) -> bool:
    match = _HEADER.match(line.rstrip("\r"))
    return match is not None and match.group(2) == entry_id
