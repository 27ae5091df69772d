"""The last ranking terms: keyword coverage and decay (pure, ``life:lexical``, ``life:rank-floors``).

After fusion has ordered the best hits, two bounded terms are added and the hits re-sorted:

    score + LEXICAL_WEIGHT × keyword coverage   (engine.recall.lexical: distinct query words
                                                 covered, tags above body, verbatim bonus)
          + decay nudge                          (engine.ageing.decay.nudge: 0 … −DECAY_WEIGHT)

Both are small next to the fused score's spread, so they reorder matches of comparable relevance
and cannot sink a strong match below a clearly weaker one (the decay nudge is at most
``DECAY_WEIGHT``; a hit only moves below one whose score was within that of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.ageing.decay import DECAY_WEIGHT, nudge
from engine.recall.search import Hit

#: Measured on LoCoMo's dev halves (docs/benchmarks.md): coverage breaks near-ties only.
LEXICAL_WEIGHT = 0.1

DecayOf = Callable[[str], float | None]


def rerank(
    hits: Sequence[Hit],
    decay_of: DecayOf | None = None,
    *,
    lexical_weight: float = LEXICAL_WEIGHT,
    decay_weight: float = DECAY_WEIGHT,
) -> tuple[Hit, ...]:
    """``hits`` with the coverage and decay terms added to their scores, best first (stable)."""
    out: list[Hit] = []
    for hit in hits:
        score = hit.score + lexical_weight * hit.lexical
        if decay_of is not None:
            d = decay_of(hit.memory)
            if d is not None:
                score += nudge(d, decay_weight)
        out.append(Hit(hit.row, score, hit.reason, hit.cosine, hit.lexical))  # dataclasses.replace: 3× slower
    out.sort(key=lambda h: -h.score)
    return tuple(out)
