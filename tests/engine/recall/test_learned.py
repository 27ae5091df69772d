"""The learned fusion weights: the frozen file, and what the scorer must respect (pure)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.learned import WEIGHTS_FILE, load_learned
from engine.recall.context import RecallSettings
from engine.recall.fusion import Candidate, Learned, Signals, Weights, fuse, signals

ROOT = Path(__file__).resolve().parents[3]
FITTED = ("keyword", "meaning", "person", "session")


@pytest.mark.req("quality:locomo")
def test_the_frozen_weights_load_and_name_the_script_and_split_that_made_them() -> None:
    learned = load_learned()
    payload = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert payload["weights"] == learned.__dict__  # what the ranking uses is what the file says
    command = payload["produced_by"].split()
    assert command[:4] == ["python", "-m", "bench.fit_fusion", "fit"]
    assert (ROOT / "bench" / "fit_fusion.py").is_file()
    assert "half A only" in payload["data"]
    assert learned.keyword == 1.0  # the hand-set score's scale, which the later terms are sized for
    for name in FITTED:  # every fitted signal counts for a memory, never against it
        assert getattr(learned, name) > 0, name
    # keyword × meaning may temper the sum (diminishing returns), never reverse either signal: each
    # is in 0 … 1, so the score still rises with each of them
    assert learned.keyword + min(learned.agreement, 0.0) > 0
    assert learned.meaning + min(learned.agreement, 0.0) > 0
    assert all(math.isfinite(v) for v in learned.coefficients)


@pytest.mark.req("quality:locomo")
def test_the_learned_score_is_the_weighted_sum_of_the_signals() -> None:
    learned = Learned(keyword=1.0, meaning=0.5, person=0.25, session=2.0, agreement=-0.5, cosine=0.1)
    s = Signals(
        keyword=0.5, meaning=1.0, person=1.0, session=0.5, agreement=0.5, cosine=0.4, nearest=1.0, matched=1.0
    )
    assert learned.score(s) == pytest.approx(0.5 + 0.5 + 0.25 + 1.0 - 0.25 + 0.04)
    one = Candidate(1, "nte_a", "g1", bm25=4.0, cosine=0.2, knn=True, person=True)
    two = Candidate(2, "nte_b", "g2", bm25=2.0, cosine=0.6, knn=True)
    sig = signals([one, two], {"g1": 0.5})
    assert sig[0].agreement == sig[0].keyword * sig[0].meaning
    ranked = fuse([one, two], {"g1": 0.5}, Weights(learned=learned))
    assert {r.key: r.score for r in ranked} == pytest.approx(
        {1: learned.score(sig[0]), 2: learned.score(sig[1])}
    )


candidates = st.lists(
    st.tuples(
        st.one_of(st.none(), st.floats(0.1, 20.0)),  # bm25
        st.floats(-0.2, 0.9),  # cosine
        st.booleans(),  # the query names its speaker
        st.sampled_from(["g0", "g1", "g2", "g3"]),  # its session
    ),
    min_size=2,
    max_size=30,
)


def _build(raw: list[tuple[float | None, float, bool, str]]) -> list[Candidate]:
    return [
        Candidate(k, f"nte_{k}", group, bm25, cosine, True, person, None, "2026-01-01")
        for k, (bm25, cosine, person, group) in enumerate(raw)
    ]


@pytest.mark.req("quality:locomo")
@settings(max_examples=300, deadline=None)
@given(
    candidates,
    st.dictionaries(st.sampled_from(["g0", "g1", "g2", "g3"]), st.floats(0.0, 3.0)),
    st.data(),
)
def test_a_stronger_signal_never_ranks_a_memory_lower(
    raw: list[tuple[float | None, float, bool, str]], groups: dict[str, float], data: st.DataObject
) -> None:
    """Monotone in every signal the frozen weights count: more keyword match, nearer in meaning,
    named by the query, or a better session never moves a memory down."""
    weights = Weights(learned=load_learned())
    i = data.draw(st.integers(0, len(raw) - 1))
    bm25, cosine, person, group = raw[i]
    signal = data.draw(st.sampled_from(["keyword", "meaning", "person", "session"]))
    more = data.draw(st.floats(0.01, 10.0))
    raised = list(raw)
    boosted = dict(groups)
    if signal == "keyword":
        raised[i] = ((bm25 or 0.0) + more, cosine, person, group)
    elif signal == "meaning":
        raised[i] = (bm25, min(cosine + more, 1.0), person, group)
    elif signal == "person":
        raised[i] = (bm25, cosine, True, group)
    else:
        boosted[group] = groups.get(group, 0.0) + more

    def rank(items: list[tuple[float | None, float, bool, str]], sessions: dict[str, float]) -> int:
        return [s.key for s in fuse(_build(items), sessions, weights)].index(i)

    assert rank(raised, boosted) <= rank(raw, groups)


@pytest.mark.req("quality:locomo")
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not a fusion weights file"),
        ('{"no": "weights"}', "not a fusion weights file"),
        (
            '{"weights": {"keyword": 1, "meaning": 1, "person": 1, "session": 1, "mood": 2}}',
            "unknown signals mood",
        ),
        ('{"weights": {"keyword": 1, "meaning": NaN, "person": 1, "session": 1}}', "finite number"),
        ('{"weights": {"keyword": 1, "meaning": "high", "person": 1, "session": 1}}', "finite number"),
        ('{"weights": {"keyword": 1}}', "rewrite it with bench.fit_fusion"),
    ],
)
def test_a_weights_file_that_is_not_one_is_refused_saying_what_to_fix(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "fusion_weights.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=says):
        load_learned(path)


@pytest.mark.req("quality:locomo")
def test_recall_ranks_by_the_hand_set_weights_and_the_learned_ones_only_when_asked() -> None:
    assert RecallSettings().weights.learned is None  # docs/recall.md: the learned fusion was not kept
    asked = Weights(learned=load_learned())  # what bench.locomo --fusion learned measures
    one = Candidate(1, "nte_a", "g1", bm25=4.0, cosine=0.2, knn=True)
    two = Candidate(2, "nte_b", "g1", bm25=3.0, cosine=0.6, knn=True)
    hand = {s.key: s.score for s in fuse([one, two], {"g1": 1.0})}
    assert hand == pytest.approx({1: 1.0 + 0.35, 2: 0.75 + 1.5 + 0.35})
    learned = {s.key: s.score for s in fuse([one, two], {"g1": 1.0}, asked)}
    assert learned != hand
