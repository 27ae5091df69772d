"""List questions about a person: what class of thing a query asks for (pure, ``quality:locomo``).

"What activities does Priya do?" is answered by several memories, each by Priya and each about
one activity — "I'm off to go swimming with the kids", "I signed up for a pottery class" — and
most of them share no word with the question: it names a *class* (activities), the memories name
its members. :func:`asked_class` finds the class a query asks for in a small, general lexicon
(English nouns for kinds of things people do, go to, own and like) with common members of each;
recall then searches the memories' words for those members, and lifts the ones by the person the
query names (:func:`engine.recall.search.rank_chunks`).

The lexicon is general vocabulary — the nouns a question uses for a class, singular and plural,
and everyday members of it — not the wording of any benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class AskedClass:
    name: str
    members: tuple[str, ...]


def _entry(nouns: str, members: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(nouns.split()), tuple(members.split())


#: class → (the nouns a question uses for it, common members of it), every word lower case
LEXICON: Final = {
    "activity": _entry(
        "activity activities hobby hobbies pastime pastimes sport sports",
        "hiking hike swimming swim running jogging camping cycling biking dancing yoga painting "
        "drawing reading cooking baking gardening fishing climbing skiing surfing skating pottery "
        "knitting photography volunteering travelling traveling singing football soccer "
        "basketball tennis golf chess meditation gym workout kayaking sailing",
    ),
    "place": _entry(
        "place places city cities country countries destination destinations spot spots",
        "beach park museum cafe restaurant bar mountains lake forest library gallery zoo market "
        "city country island trail garden theater theatre cinema shop mall festival",
    ),
    "event": _entry(
        "event events",
        "festival concert conference parade meetup workshop fundraiser party wedding show "
        "exhibition tournament competition race march fair ceremony gala rally convention",
    ),
    "book": _entry(
        "book books novel novels author authors",
        "book novel author read reading story series library fiction memoir poetry",
    ),
    "game": _entry(
        "game games",
        "game games played playing chess cards puzzle console board video online rpg shooter strategy",
    ),
    "food": _entry(
        "food foods dish dishes meal meals recipe recipes dessert desserts snack snacks",
        "pasta pizza sushi soup salad cake cookies bread pie curry tacos burger chocolate ice cream "
        "pastries pastry cooked baked recipe dinner lunch breakfast delicious tasty",
    ),
    "pet": _entry(
        "pet pets animal animals",
        "dog dogs cat cats puppy pup kitten bird fish rabbit hamster turtle horse adopted shelter",
    ),
    "instrument": _entry(
        "instrument instruments",
        "guitar piano violin drums cello flute saxophone trumpet ukulele keyboard bass clarinet harp",
    ),
    "music": _entry(
        "music band bands song songs singer singers musician musicians",
        "band singer song songs concert album music live gig musician playlist tour",
    ),
    "art": _entry(
        "art artwork artworks painting paintings drawing drawings",
        "painting painted paint drawing drew sketch sculpture canvas pottery photography mural "
        "portrait watercolor art",
    ),
    "film": _entry(
        "movie movies film films",
        "movie film cinema watched series episode documentary actor theater",
    ),
    "class": _entry(
        "class classes course courses lesson lessons group groups club clubs",
        "class course lessons workshop group club training joined signed enrolled program team",
    ),
    "item": _entry(
        "item items gift gifts purchase purchases",
        "bought got gift present new ordered purchased made",
    ),
}

_BY_NOUN: Final = {noun: name for name, (nouns, _) in LEXICON.items() for noun in nouns}


def asked_class(terms: tuple[str, ...]) -> AskedClass | None:
    """The class of thing a query (its searchable ``terms``, case-folded) asks for: the first
    term that is a noun of :data:`LEXICON`; None when it names none."""
    for term in terms:
        name = _BY_NOUN.get(term)
        if name is not None:
            return AskedClass(name, LEXICON[name][1])
    return None


@dataclass(frozen=True)
class Listing:
    """What a search for a list question adds (:func:`engine.recall.search.rank_chunks`): the
    best ``depth`` memories (bm25) whose words name one of ``members`` join the candidates, and
    each by the person the query names gains ``weight`` × its bm25 over the best of theirs."""

    members: tuple[str, ...]
    weight: float = 0.5
    depth: int = 50
