"""Whether anything *closely* matched (pure, ``recall:honest-miss``).

Fused scores are relative to the candidates of one query, so they cannot say "nothing matched".
The match confidence of a memory is absolute instead: the larger of its keyword coverage
(:func:`~engine.recall.lexical.lexical_score`) and its cosine similarity rescaled to 0 … 1
between :data:`COS_FLOOR` and :data:`COS_CEIL`. In keyword coverage a name of the query that the
workspace knows counts as covered by every memory: a name says whom a question is about, and
whether a memory repeats it depends only on how it happens to be worded ("Caroline: I …" or just
"I …") — so the same memories give the same verdict in every layout. A query that names someone
(a capitalised word) the workspace has never heard of is scaled down by
:data:`UNKNOWN_NAME_FACTOR`. ``relevant`` is
true when the best confidence reaches ``min_match_score``; the constants were calibrated on
LoCoMo's dev halves (see docs/recall.md), for query vectors that leave out the names the
workspace knows (:meth:`engine.recall.context.Recall.dense_text`).
"""

from __future__ import annotations

from collections.abc import Iterable

COS_FLOOR = 0.15
COS_CEIL = 0.6
UNKNOWN_NAME_FACTOR = 0.5
MIN_MATCH_SCORE = 0.5
#: The floor: ``get_context`` lists no match whose confidence is below it, on a hit or a miss
#: (``match_floor``; chosen on LoCoMo's dev split, docs/benchmarks.md).
MATCH_FLOOR = 0.2


def confidence(lexical: float, cosine: float | None) -> float:
    cos = 0.0 if cosine is None else (cosine - COS_FLOOR) / (COS_CEIL - COS_FLOOR)
    return max(lexical, min(max(cos, 0.0), 1.0))


def query_confidence(best: Iterable[float], unknown_names: int, named: int) -> float:
    """The confidence of the best match, scaled down when the query's names are unknown here."""
    top = max(best, default=0.0)
    if named and unknown_names == named:
        top *= UNKNOWN_NAME_FACTOR
    return top
