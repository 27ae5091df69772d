"""Does the first ten hold the answer? A second reading of ``bench.locomo``'s rankings.

LoCoMo labels each question with the turns that answer it, and recall@10 counts the labelled
turns found in the first ten. A conversation often says the same thing more than once ("I
signed up for a pottery class", later "pottery's so relaxing"); the labels name one mention, so
a first ten holding another mention of the same answer scores as a miss. This measure reads the
answer itself: the share of the answer's words (LoCoMo's ``answer`` field, stop words dropped)
found in the first ten's turns, each word read as the index's tokenizer reads it (porter stems,
:class:`bench.misses.Stems`).

It is taken only over *word-checkable* questions — those whose labelled turns hold every word of
the answer. Elsewhere the answer is worded apart from the turns (a date worked out from the
session's day, "The week before 9 June 2023"; an inference, "Likely yes") and word matching says
nothing. On the checkable questions the labelled turns hold the whole answer by construction, so
the figures compare like with like: recall@10 of the labelled turns against the share of the
answer's words the first ten hold. Not a metric of the engine's own (nothing is tuned on it): a
check on how much of what recall@10 counts as missed is the label's choice of mention.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from engine.recall.query import terms_of

Holding = Callable[[str], Collection[str]]  # a word → the turns that hold it (bench.misses.Stems)


@dataclass(frozen=True)
class AnswerCheck:
    checkable: bool  # the labelled turns hold every word of the answer
    words: float  # the share of the answer's words the first ten hold (0 … 1)
    whole: bool  # the first ten hold every word of the answer
    recall: float  # recall@10 of the labelled turns, for the same question


def check(
    answer: str, holding: Holding, labelled: Collection[str], first_ten: Collection[str], recall: float
) -> AnswerCheck | None:
    """How much of ``answer`` the ``first_ten`` turns hold, beside the ``labelled`` turns (turn
    ids; ``holding``: which turns hold a word); None when the answer has no searchable word
    ("2", "It is")."""
    wanted = terms_of(answer)
    if not wanted:
        return None
    holders = [set(holding(w)) for w in wanted]
    held = [not h.isdisjoint(first_ten) for h in holders]
    return AnswerCheck(
        checkable=all(not h.isdisjoint(labelled) for h in holders),
        words=sum(held) / len(wanted),
        whole=all(held),
        recall=recall,
    )


@dataclass
class AnswerTally:
    rows: list[tuple[int, AnswerCheck]] = field(default_factory=list)

    def add(self, category: int, found: AnswerCheck | None) -> None:
        if found is not None:
            self.rows.append((category, found))

    def summary(self, categories: Iterable[int] = (1, 2, 3, 4)) -> dict[str, dict[str, float]]:
        """Per category and over all (``"all"``): how many questions were word-checkable
        (``n``, of ``asked``), and on those the labelled turns' recall@10, the share of the
        answer's words in the first ten and how often the whole answer was there (percent)."""
        out = {"all": _summary([c for _, c in self.rows])}
        for cat in categories:
            out[f"c{cat}"] = _summary([c for k, c in self.rows if k == cat])
        return out


def _summary(checks: Sequence[AnswerCheck]) -> dict[str, float]:
    checkable = [c for c in checks if c.checkable]

    def pct(values: Iterable[float]) -> float:
        got = list(values)
        return round(100 * sum(got) / len(got), 1) if got else 0.0

    return {
        "n": len(checkable),
        "asked": len(checks),
        "R@10": pct(c.recall for c in checkable),
        "answer_words": pct(c.words for c in checkable),
        "whole_answer": pct(float(c.whole) for c in checkable),
    }
