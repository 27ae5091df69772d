"""Validation and normalisation of what callers send (pure functions).

Every refusal raises an :class:`~engine.errors.InvalidInput` whose message says what to fix.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, date, datetime, time

from engine.errors import BadDate, BadScope, InvalidInput, TooLong

MAX_STATEMENT = 4000
MAX_KEY = 200
MAX_OBJECT = 1000
MAX_TAG = 64
MAX_TAGS = 20
MAX_REASON = 500
MAX_SOURCE = 200

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LINE_BREAK = re.compile(r"[\t\n\r]")
_SCOPE = re.compile(r"^[a-z0-9][a-z0-9:_./-]{0,63}$")
_SPACE = re.compile(r"\s+")


def _describe(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def check_text(field: str, value: str, *, limit: int = MAX_STATEMENT, single_line: bool = False) -> str:
    """Refuse empty, over-long or control-character text. Never cuts: the text comes back whole."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string")
    if not value.strip():
        raise InvalidInput(f"{field} is empty: pass the words to save")
    if len(value) > limit:
        raise TooLong(
            f"{field} is {len(value):,} characters; the limit is {limit:,}. "
            "Nothing was saved: split it into smaller memories or shorten it."
        )
    bad = _CONTROL.search(value)
    if bad:
        raise InvalidInput(
            f"{field} contains the control character {_describe(bad.group())} at position {bad.start()}; "
            "remove it (tab, line feed and carriage return are allowed)"
        )
    if single_line and _LINE_BREAK.search(value):
        raise InvalidInput(f"{field} must be a single line without tabs or line breaks")
    return value


def normalize_key(value: str) -> str:
    """How subjects, predicates and objects compare: NFC, trimmed, whitespace collapsed, case folded."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", value).strip()).casefold()


def check_scope(scope: str | None) -> str | None:
    if scope is None:
        return None
    if not isinstance(scope, str) or not _SCOPE.match(scope) or ".." in scope:
        raise BadScope(
            f"scope {scope!r} is not a valid label: use 1-64 characters of lowercase a-z, 0-9 and "
            "':_./-', starting with a letter or digit, without '..' (for example 'project:fjord')"
        )
    return scope


def check_tags(tags: Sequence[str] | None) -> tuple[str, ...]:
    if not tags:
        return ()
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"{len(tags)} tags given; at most {MAX_TAGS} are allowed")
    out: list[str] = []
    for tag in tags:
        check_text("a tag", tag, limit=MAX_TAG, single_line=True)
        clean = tag.strip()
        if clean not in out:
            out.append(clean)
    return tuple(out)


def check_importance(importance: float | None) -> float | None:
    if importance is None:
        return None
    if (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not math.isfinite(importance)
    ):
        raise InvalidInput("importance must be a number from 0 to 1")
    if not 0.0 <= importance <= 1.0:
        raise InvalidInput(f"importance {importance} is out of range: use a number from 0 to 1")
    return float(importance)


def parse_when(value: str, field: str = "as_of") -> datetime:
    """An ISO 8601 date or datetime as an aware UTC datetime.

    A bare date means the end of that day, UTC; a datetime without an offset is taken as UTC.
    """
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise BadDate(f"{field} is empty: give an ISO date (2026-11-30) or datetime (2026-11-30T14:00:00Z)")
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime.combine(day, time.max, tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise BadDate(
            f"{field} {value!r} is not an ISO 8601 date or datetime: "
            "use 2026-11-30 or 2026-11-30T14:00:00Z (or with an offset such as +02:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_day(value: str, field: str = "date") -> date:
    text = value.strip() if isinstance(value, str) else ""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise BadDate(f"{field} {value!r} is not an ISO date: use YYYY-MM-DD, e.g. 2026-11-30") from None
