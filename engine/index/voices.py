"""Who wrote each memory of a conversation kept turn by turn without names (pure).

An agent that keeps a chat as it goes often writes each turn as it was said — "Thanks, Priya!
The trip was great." — with nothing saying who said it. The words still tell a good deal: a
memory that speaks to Priya by name is not by Priya, and in an exchange between two people the
turns take turns. Around each memory of a stream this module looks at its neighbours, and when
they read as a two-person exchange — the people spoken to by name are mostly two — it works out
how likely each of the two wrote it: a two-state hidden Markov model whose states are the two
people, whose turns mostly alternate (:data:`STAY`), where a memory that speaks to one of them is
unlikely to be theirs (:data:`SPOKEN_TO`) and one whose words start with one of their names (its
subject, "Priya: …", "On 8 May, Priya said …") likely is (:data:`SUBJECT`).

Each memory's answer depends only on the memories within :data:`WINDOW` places of it, so a new
memory changes the answers of the last :data:`WINDOW` before it and no others, and a rebuilt index
holds the same values as one kept up to date write by write.

Recall uses the answer as the person prior's weight (:mod:`engine.recall.fusion`): a memory by the
person a question names counts as much as one whose words name them as their subject.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from engine.index.mentions import addressed, name_spans, subject

#: Memories either side of one that decide who wrote it.
WINDOW: Final = 40
#: The chance that two memories in a row are by the same person.
STAY: Final = 0.02
#: How much less likely a memory is to be by someone it speaks to by name.
SPOKEN_TO: Final = 0.05
#: How much less likely a memory is to be by the other person when it starts with one's name.
SUBJECT: Final = 0.3
#: The two people must be at least this share of the names spoken to around a memory.
TWO_PEOPLE: Final = 0.8
#: A shorter form of a name counts as the name ("Mel" for "Melanie") from this many letters.
NICKNAME_MIN: Final = 3
#: Probabilities are stored rounded to this many places (so that a stored value is exact text).
PLACES: Final = 2


@dataclass(frozen=True)
class Turn:
    """One memory of a stream as the inference sees it."""

    spoken_to: frozenset[str]  # the names it speaks to, case-folded (:func:`vocatives`)
    subject: str  # the name its words start with, case-folded ("" when none)


#: A memory that speaks to nobody and names nobody (most notes): one shared value.
NOBODY: Final = Turn(frozenset(), "")


def turn_of(text: str) -> Turn:
    """``text`` as the inference reads it: whom it speaks to, and its subject."""
    spoken_to, first = vocatives(text), subject(text).casefold()
    return Turn(spoken_to, first) if spoken_to or first else NOBODY


def vocatives(text: str) -> frozenset[str]:
    """The names ``text`` speaks to, case-folded: a name set off by a comma or after a greeting
    and before , ! ? . or the end ("Thanks, Priya!", "Hey Priya, …", "…, Priya."). A sentence's
    first word is never one ("Cool, …", "Definitely!"): too often it is not a name."""
    return frozenset(
        word.casefold() for word, start, end in name_spans(text) if addressed(text, start, end, strict=True)
    )


def same_person(short: str, name: str) -> bool:
    """Whether ``short`` (case-folded) is ``name`` or a shorter form of it ("mel", "melanie")."""
    return short == name or (len(short) >= NICKNAME_MIN and name.startswith(short))


def _people(turns: Sequence[Turn]) -> tuple[dict[str, str], tuple[str, str] | None]:
    """The names spoken to in ``turns``, each mapped to the fullest form used (a nickname to the
    most used longer name it starts), and the two people when they are most of them."""
    counts: dict[str, int] = {}
    for turn in turns:
        for name in turn.spoken_to:
            counts[name] = counts.get(name, 0) + 1
    canon = {}
    for name in counts:
        longer = [other for other in counts if other != name and same_person(name, other)]
        canon[name] = max(longer, key=lambda o: (counts[o], o)) if longer else name
    tally: dict[str, int] = {}
    for name, n in counts.items():
        tally[canon[name]] = tally.get(canon[name], 0) + n
    ranked = sorted(tally, key=lambda p: (-tally[p], p))
    if len(ranked) < 2:
        return canon, None
    first, second = ranked[0], ranked[1]
    if (tally[first] + tally[second]) < TWO_PEOPLE * sum(tally.values()):
        return canon, None
    return canon, (min(first, second), max(first, second))


def _emission(turn: Turn, canon: Mapping[str, str], pair: tuple[str, str]) -> tuple[float, float]:
    """How likely ``turn`` is as written by the first and by the second of ``pair`` (relative)."""
    a = b = 1.0
    subject = canon.get(turn.subject, turn.subject)
    if subject == pair[0]:
        b *= SUBJECT
    elif subject == pair[1]:
        a *= SUBJECT
    for name in turn.spoken_to:
        who = canon.get(name, name)
        if who == pair[0]:
            a *= SPOKEN_TO
        elif who == pair[1]:
            b *= SPOKEN_TO
    return a, b


def voice(turns: Sequence[Turn], at: int) -> dict[str, float]:
    """How likely each of the two people of the exchange around ``turns[at]`` wrote it, by name
    (both forms of a nicknamed one); empty when its neighbours do not read as a two-person exchange."""
    lo, hi = max(at - WINDOW, 0), min(at + WINDOW + 1, len(turns))
    window = turns[lo:hi]
    canon, pair = _people(window)
    if pair is None:
        return {}
    emit = [_emission(t, canon, pair) for t in window]
    me = at - lo
    # forward: P(first | turns lo..me), then backward: the evidence of turns me+1..hi-1
    p = 0.5
    for i in range(me + 1):
        if i:
            p = STAY * p + (1 - STAY) * (1 - p)
        a, b = emit[i]
        p = p * a / (p * a + (1 - p) * b)
    fa = fb = 1.0  # P(turns after | first), P(turns after | second), rescaled
    for i in range(len(window) - 1, me, -1):
        a, b = emit[i]
        na = STAY * a * fa + (1 - STAY) * b * fb
        nb = (1 - STAY) * a * fa + STAY * b * fb
        total = na + nb
        fa, fb = na / total, nb / total
    first = p * fa / (p * fa + (1 - p) * fb)
    out = {pair[0]: round(first, PLACES), pair[1]: round(1 - first, PLACES)}
    for name, full in canon.items():
        if full in out and name != full:
            out[name] = out[full]
    return out


def encode(voices: Mapping[str, float]) -> str:
    """``{"priya": 0.9, "sam": 0.1}`` → ``"priya=0.9 sam=0.1"`` (sorted; "" when empty)."""
    return " ".join(f"{name}={value:g}" for name, value in sorted(voices.items()))


def decode(text: str) -> dict[str, float]:
    """:func:`encode` undone."""
    out: dict[str, float] = {}
    for part in text.split():
        name, _, value = part.rpartition("=")
        if name:
            out[name] = float(value)
    return out


def chance_by(voices: Mapping[str, float], asked: Sequence[str]) -> float | None:
    """The chance the memory is by someone ``asked`` names (case-folded names; a nickname of one
    counts): the highest among them; None when none of them is one of its two people."""
    return chances({"": encode(voices)}, asked).get("")


def chances(encoded: Mapping[str, str], asked: Sequence[str]) -> dict[str, float]:
    """:func:`chance_by` for many memories at once (``memory → encoded voices``), each name
    matched against ``asked`` once; memories none of whose people is asked for are left out."""
    matches: dict[str, bool] = {}
    out: dict[str, float] = {}
    for memory, text in encoded.items():
        best: float | None = None
        for part in text.split():  # decode()'s parsing, inline: ≈ 0.06 ms less per search
            name, _, value = part.rpartition("=")
            hit = matches.get(name)
            if hit is None:
                hit = matches[name] = any(same_person(name, a) or same_person(a, name) for a in asked)
            if hit and (best is None or float(value) > best):
                best = float(value)
        if best is not None:
            out[memory] = best
    return out
