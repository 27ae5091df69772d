"""Keyword coverage of a memory (pure, ``life:lexical``).

The score is the fraction of the query's distinct words the memory accounts for — a word found
among its tags counts fully, one found in its body counts :data:`BODY_WEIGHT` — plus
:data:`VERBATIM_BONUS` when the memory contains the query's words verbatim, in order. Words are
compared after a light suffix strip (``branches`` ~ ``branch``). It is an absolute measure
(0 … 1 + bonus), which is why recall uses it to decide whether anything matched at all.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import lru_cache

from engine.recall.query import words_of
from engine.words import STOP_WORDS

BODY_WEIGHT = 0.8
TAG_WEIGHT = 1.0
VERBATIM_BONUS = 0.2
_SUFFIXES = ("ing", "ies", "ied", "es", "ed", "ly", "s")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    if len(word) <= 4:
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            return base + "y" if suffix in ("ies", "ied") else base
    return word


def stems(words: Iterable[str]) -> set[str]:
    return {stem(w) for w in words}


def lexical_score(
    query_terms: tuple[str, ...], body: str, tags: Iterable[str] = (), given: Collection[str] = ()
) -> float:
    """Coverage of ``query_terms`` by ``body`` and ``tags`` (0 … 1), plus the verbatim bonus;
    terms in ``given`` count as found in the body whether they are there or not."""
    if not query_terms:
        return 0.0
    distinct, body_stems = _read(body)
    in_body = body_stems | stems(given) if given else body_stems
    in_tags = stems(w for tag in tags if tag for w in words_of(tag))
    covered = 0.0
    for term in query_terms:
        s = stem(term)
        covered += TAG_WEIGHT if s in in_tags else BODY_WEIGHT if s in in_body else 0.0
    score = covered / len(query_terms)
    verbatim = len(query_terms) >= 2 and distinct.issuperset(query_terms)
    if verbatim and _contains_run(words_of(body), query_terms):
        score += VERBATIM_BONUS
    return score


@lru_cache(maxsize=512)
def _read(body: str) -> tuple[frozenset[str], frozenset[str]]:
    """``body``'s distinct words and their stems, kept for the last bodies read: the best
    memories of one query are often among the next one's."""
    distinct = frozenset(words_of(body))
    return distinct, frozenset(stems(distinct))


def _contains_run(words: list[str], terms: tuple[str, ...]) -> bool:
    content = [w for w in words if len(w) >= 2 and w not in STOP_WORDS]
    n, first = len(terms), terms[0]
    starts = content[: len(content) - n + 1]
    return any(w == first and tuple(content[i : i + n]) == terms for i, w in enumerate(starts))


def dated_terms(terms: tuple[str, ...], dates: str) -> set[str]:
    """The ``terms`` that a memory's dates words hold (``dates``: "8 June 2023 June 2023
    2023-06-08", the days it was written and names) — "june", "2023"."""
    said = _date_stems(dates)
    return {t for t in terms if stem(t) in said} if said else set()


@lru_cache(maxsize=4096)
def _date_stems(dates: str) -> frozenset[str]:
    return frozenset(stems(words_of(dates)))
