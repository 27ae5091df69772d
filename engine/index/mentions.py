"""What a memory's words mention: people and other names, and the days it talks about (pure).

Nothing here depends on how a memory is laid out: a name may stand anywhere ("Caroline: …",
"On 8 May 2023, Caroline said …", "… told Caroline …") and a date may be written in any common
form, before or after the words.

- :func:`names` — capitalised words that are not function words, months, weekdays or words of
  time, in order of first appearance. The first of them is the memory's *subject*
  (:func:`subject`): who a note is by or about, as the first name in a sentence usually is.
- :func:`written_days` — the calendar days the text names: absolute dates ("8 May 2023",
  "May 8, 2023", "2023-05-08", "8/5/2023" is left alone as ambiguous) and relative ones
  ("yesterday", "last Tuesday", "two weeks ago", "next month"), resolved against the memory's own
  time. A year-less date ("on 8 May") takes the year that puts it nearest the memory's time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Final

from engine.words import STOP_WORDS

MONTHS: Final = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTH_ABBR: Final = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_TIME_WORDS: Final = frozenset(
    (
        "yesterday", "today", "tomorrow", "tonight", "last", "next", "ago", "morning", "evening",
        "afternoon", "night", "week", "weekend", "month", "year", "day", "days", "weeks", "months",
    )
)  # fmt: skip
#: Words that open an address or an exclamation ("Hey Priya!", "Thanks, Priya."): never names.
_INTERJECTIONS: Final = frozenset(
    (
        "hey", "hi", "hello", "thanks", "thank", "congrats", "congratulations", "dear", "bye",
        "goodbye", "welcome", "sorry", "yes", "yeah", "yep", "no", "nope", "wow", "oh", "ah",
        "aw", "aww", "ok", "okay", "haha", "lol", "cheers", "hmm", "well", "sure", "great",
    )
)  # fmt: skip
#: Capitalised words that are never names: function words, months, weekdays, words of time,
#: interjections (the query side reads names with the same list: engine.recall.query).
NOT_NAMES: Final = (
    STOP_WORDS | frozenset(MONTHS) | frozenset(_MONTH_ABBR) | frozenset(WEEKDAYS) | _TIME_WORDS
    | frozenset(["i", "i'm", "i've", "i'll", "i'd", "im", "ive"]) | _INTERJECTIONS
)  # fmt: skip
_CAPITALISED = re.compile(r"(?<![\w'’])([A-Z][\w]*(?:['’][a-z]+)?)")
MAX_NAMES = 12

_NUM_WORDS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple": 2, "few": 3,
}  # fmt: skip
_MONTH_RE = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_RE}(?:,?\s+(\d{{4}}))?\b", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH_RE}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?\b", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|(last|this|next)\s+(week(?:end)?|month|year|"
    + "|".join(WEEKDAYS)
    + r")|(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple|few)\s+(?:of\s+)?"
    r"(day|week|month|year)s?\s+ago)\b",
    re.I,
)


def name_spans(text: str) -> Iterator[tuple[str, int, int]]:
    """Each capitalised word of ``text`` that may be a name (not a function word, month, weekday,
    word of time or interjection), a possessive ``'s`` left off: ``(word, start, end)``."""
    for match in _CAPITALISED.finditer(text):
        word = re.sub(r"['’]s$", "", match.group(1))
        key = word.casefold()
        if len(key) < 2 or key in NOT_NAMES or key.isdigit():
            continue
        yield word, match.start(), match.start() + len(word)


def names(text: str) -> tuple[str, ...]:
    """The names ``text`` mentions, in order of first appearance (at most 12; one per case-folded form)."""
    out: dict[str, str] = {}
    for word, _, _ in name_spans(text):
        key = word.casefold()
        if key in out:
            continue
        out[key] = word
        if len(out) >= MAX_NAMES:
            break
    return tuple(out.values())


_GREETING: Final = r"\b(?:" + "|".join(sorted(_INTERJECTIONS)) + r")\s+"
#: A name set off as an address: after the start, a comma or an interjection, and before , ! ? . or the end.
_BEFORE_ADDRESS = re.compile(rf"(?:^|[,;.!?]\s*|{_GREETING})$", re.I)
#: … the same, but never a sentence's first word ("Cool, …", "Definitely!" are too often not names).
_STRICTLY_BEFORE_ADDRESS = re.compile(rf"(?:[,;]\s*|{_GREETING})$", re.I)
_AFTER_ADDRESS = re.compile(r"^['’]?\s*(?:[,!?.;]|$)")


def addressed(text: str, start: int, end: int, *, strict: bool = False) -> bool:
    """Whether the name at ``text[start:end]`` is the person spoken *to* ("Thanks, Priya!",
    "Priya, look", "Hey Priya.") rather than the one speaking or spoken about. ``strict``: only
    after a comma or a greeting ("Thanks, Priya!", "Hey Priya, …"), never as a sentence's first word."""
    before = text[max(start - 40, 0) : start]
    lead = _STRICTLY_BEFORE_ADDRESS if strict else _BEFORE_ADDRESS
    return bool(_AFTER_ADDRESS.match(text[end : end + 3])) and bool(lead.search(before))


def subject(text: str) -> str:
    """The first name ``text`` mentions that is not the person it addresses ("" when none): who a
    memory is by or about."""
    head = text[:200]
    for word, start, end in name_spans(head):
        if not addressed(head, start, end):
            return word
    return ""


def _month(word: str) -> int:
    return _MONTH_ABBR[word.lower()[:4] if word.lower().startswith("sept") else word.lower()[:3]]


def _nearest_year(month: int, day: int, anchor: date) -> date | None:
    best: date | None = None
    for year in (anchor.year - 1, anchor.year, anchor.year + 1):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if best is None or abs(candidate - anchor) < abs(best - anchor):
            best = candidate
    return best


#: Every absolute date form has a digit, and every relative one one of these words: text with
#: neither (most text) skips the date expressions, which were most of the cost of a memory's rows
#: (a start-up comparison at 100,000 chunks: half of its 46 s of CPU).
_DIGIT = re.compile(r"\d")
_RELATIVE_WORDS: Final = ("yesterday", "today", "tonight", "tomorrow", "last", "this", "next", "ago")
_RELATIVE_HINT = re.compile("|".join(_RELATIVE_WORDS), re.I)


def may_be_relative(text: str) -> bool:
    """False only when :data:`_RELATIVE` cannot match ``text``. ASCII text is searched lower-cased
    (4× faster); other text with the expression's own case rules ("laſt", "tonıght" match)."""
    if text.isascii():
        lowered = text.lower()
        return any(word in lowered for word in _RELATIVE_WORDS)
    return _RELATIVE_HINT.search(text) is not None


def _absolute(text: str, anchor: date | None) -> list[tuple[int, date]]:
    found: list[tuple[int, date]] = []
    if _DIGIT.search(text) is None:
        return found

    def add(pos: int, year: str | None, month: int, day: int) -> None:
        try:
            if year is not None:
                found.append((pos, date(int(year), month, day)))
            elif anchor is not None:
                near = _nearest_year(month, day, anchor)
                if near is not None:
                    found.append((pos, near))
        except ValueError:
            return

    for m in _DAY_MONTH.finditer(text):
        add(m.start(), m.group(3), _month(m.group(2)), int(m.group(1)))
    for m in _MONTH_DAY.finditer(text):
        add(m.start(), m.group(3), _month(m.group(1)), int(m.group(2)))
    for m in _ISO.finditer(text):
        add(m.start(), m.group(1), int(m.group(2)), int(m.group(3)))
    return found


def _relative(text: str, anchor: date) -> list[tuple[int, date]]:
    found: list[tuple[int, date]] = []
    if not may_be_relative(text):
        return found
    for m in _RELATIVE.finditer(text):
        phrase = m.group(0).lower()
        pos = m.start()
        if phrase in ("today", "tonight"):
            found.append((pos, anchor))
        elif phrase == "yesterday":
            found.append((pos, anchor - timedelta(days=1)))
        elif phrase == "tomorrow":
            found.append((pos, anchor + timedelta(days=1)))
        elif m.group(2):
            which, unit = m.group(2).lower(), m.group(3).lower()
            step = {"last": -1, "this": 0, "next": 1}[which]
            if unit in WEEKDAYS:
                delta = WEEKDAYS.index(unit) - anchor.weekday()
                if which == "last":
                    delta = delta - 7 if delta >= 0 else delta
                elif which == "next":
                    delta = delta + 7 if delta <= 0 else delta
                found.append((pos, anchor + timedelta(days=delta)))
            elif unit.startswith("week"):
                found.append((pos, anchor + timedelta(weeks=step)))
            elif unit == "month":
                found.append((pos, _add_months(anchor, step)))
            else:
                found.append((pos, _add_months(anchor, 12 * step)))
        else:
            count_word, unit = m.group(4).lower(), m.group(5).lower()
            count = int(count_word) if count_word.isdigit() else _NUM_WORDS[count_word]
            if unit == "day":
                found.append((pos, anchor - timedelta(days=count)))
            elif unit == "week":
                found.append((pos, anchor - timedelta(weeks=count)))
            else:
                found.append((pos, _add_months(anchor, -count * (12 if unit == "year" else 1))))
    return found


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, 1)


def written_days(text: str, moment: datetime | None) -> tuple[tuple[date, bool], ...]:
    """The days ``text`` names, in order of appearance: ``(day, absolute?)``. Relative ones are
    resolved against ``moment`` (none without it); a month-level phrase ("last month") gives the
    month's first day."""
    anchor = None if moment is None else moment.date()
    found = [(pos, d, True) for pos, d in _absolute(text, anchor)]
    if anchor is not None:
        found += [(pos, d, False) for pos, d in _relative(text, anchor)]
    found.sort(key=lambda x: x[0])
    out: dict[date, bool] = {}
    for _, d, absolute in found:
        out[d] = out.get(d, False) or absolute
    return tuple(out.items())


def stated_day(text: str, written: datetime | None = None) -> date | None:
    """The first absolute date written in the first 200 characters: the day a memory says it is
    about (a dated entry), or None. A date after the day it was ``written`` (a day's grace for
    time zones) is a plan or a deadline, not the day it is about, and is passed over."""
    latest = None if written is None else written.date() + timedelta(days=1)
    found = [day for _, day in sorted(_absolute(text[:200], None)) if latest is None or day <= latest]
    return found[0] if found else None
