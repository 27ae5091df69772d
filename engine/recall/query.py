"""Query text → what the searches use (pure). FTS5 only ever sees quoted terms (``recall:query-safe``).

Words are Unicode word runs, case-folded; words shorter than two characters and English stop
words are dropped (``life:lexical``). Each remaining word becomes an FTS5 string (``"word"``,
with any ``"`` doubled), joined by ``OR``: hyphens, quotes, ``AND``/``NEAR``, apostrophes, emoji
and other scripts can never form FTS5 syntax.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from engine.index.mentions import NOT_NAMES
from engine.words import STOP_WORDS

_WORD = re.compile(r"\w+", re.UNICODE)
_NAME = re.compile(r"\b([A-Z][\w'’-]*)")
MAX_TERMS = 32


@dataclass(frozen=True)
class Query:
    text: str
    terms: tuple[str, ...]  # distinct searchable words, in order
    words: frozenset[str]  # every word of the query (stop words too), for matching names
    names: tuple[str, ...]  # capitalised words after the first (candidate names), case-folded

    @property
    def fts(self) -> str:
        return fts_expression(self.terms)

    @property
    def empty(self) -> bool:
        return not self.text.strip()


def words_of(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", text).casefold()
    found: list[str] = _WORD.findall(folded)
    if "_" not in folded:
        return found
    return [w for w in (x.strip("_") for x in found) if w]


def terms_of(text: str) -> tuple[str, ...]:
    """The query's searchable words: distinct, ≥ 2 characters, not stop words, at most 32."""
    out = dict.fromkeys(w for w in words_of(text) if len(w) >= 2 and w not in STOP_WORDS)
    return tuple(out)[:MAX_TERMS]


def quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts_expression(terms: tuple[str, ...]) -> str:
    """``"a" OR "b"``; empty when there is nothing to search for."""
    return " OR ".join(quote(t) for t in terms)


def parse_query(text: str | None) -> Query:
    text = (text or "").strip()
    names: list[str] = []
    for i, match in enumerate(_NAME.finditer(text)):
        word = re.sub(r"['’]s$", "", match.group(1)).casefold()
        if (i > 0 or match.start() > 0) and word not in NOT_NAMES and len(word) >= 2:
            names.append(word)
    return Query(text, terms_of(text), frozenset(words_of(text)), tuple(dict.fromkeys(names)))


def without_names(text: str, names: Collection[str]) -> str:
    """``text`` with every capitalised word that is one of ``names`` (case-folded; a possessive
    ``'s`` goes with it) left out, spaces tidied: "What did Caroline's team research?" without
    ``{"caroline"}`` is "What did team research?". The text itself when nothing is left."""
    if not names:
        return text

    def drop(match: re.Match[str]) -> str:
        word = re.sub(r"['’]s$", "", match.group(1)).casefold()
        return "" if word in names else match.group(0)

    out = " ".join(_NAME.sub(drop, text).split())
    return out if words_of(out) else text


def names_person(query: Query, person: str) -> bool:
    """Whether the query names ``person`` (every word of the name appears in the query)."""
    parts = _name_words(person)
    return bool(parts) and all(p in query.words for p in parts)


@lru_cache(maxsize=4096)
def _name_words(person: str) -> tuple[str, ...]:
    return tuple(words_of(person))
