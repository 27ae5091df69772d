"""Fitting fusion weights (bench/fit_fusion.py): the dump re-ranks as the search does, and the fit
finds the signals that separate evidence from the rest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import fit_fusion, locomo
from bench.learned import load_learned
from tests.bench.test_bench_smoke import fake_locomo


@pytest.mark.req("quality:locomo")
def test_the_dump_ranks_the_candidates_as_bench_locomo_does(tmp_path: Path) -> None:
    data, keep, cache, out = (
        tmp_path / "locomo.json",
        tmp_path / "keep",
        tmp_path / "cache.sqlite",
        tmp_path / "out",
    )
    fake_locomo(data)
    args = ["dump", str(data), "--keep", str(keep), "--cache", str(cache), "--out", str(out)]
    assert fit_fusion.main(args) == 0
    dump = fit_fusion.Dump.load(out / "engine-speaker.npz")
    assert len(dump.half) == 9 and not dump.half.any()  # conv-0/1/2: none of them in half A
    assert dump.x.shape == (len(dump.question), len(fit_fusion.FEATURES))
    assert dump.hits.sum() > 0  # the evidence turns are among the candidates
    offline = {
        "hand": fit_fusion.recall_at_10(fit_fusion.hand(dump) + dump.nudge, dump),
        "learned": fit_fusion.recall_at_10(fit_fusion.learned_score(load_learned(), dump), dump),
    }
    for fusion, figures in offline.items():
        result = tmp_path / f"{fusion}.json"
        run = [str(data), "--keep", str(keep), "--cache", str(cache), "--no-context", "--fusion", fusion]
        assert locomo.main([*run, "--json", str(result)]) == 0
        measured = json.loads(result.read_text(encoding="utf-8"))
        assert measured["all"]["R@10"] == figures["all"]
        assert measured["B"]["R@10"] == figures["B"]


def _questions(rng: np.random.Generator, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Questions whose evidence memory is ahead on keyword and meaning, level on the rest."""
    out = []
    for _ in range(n):
        x = rng.uniform(0, 1, size=(30, 3))
        label = np.zeros(30, dtype=bool)
        label[0] = True
        x[0, 0] = min(1.0, x[0, 0] + 0.5)
        x[0, 1] = min(1.0, x[0, 1] + 0.3)
        out.append((x, label))
    return out


@pytest.mark.req("quality:locomo")
def test_the_fit_weighs_the_signals_that_separate_the_evidence() -> None:
    beta = fit_fusion.fit_softmax(_questions(np.random.default_rng(7), 200), 1e-4)
    assert beta[0] > beta[1] > 0  # the stronger separation weighs more
    assert abs(beta[2]) < 0.3 * beta[1]  # a signal that says nothing weighs next to nothing
    model = fit_fusion.model_of(beta, ("keyword", "meaning", "person"))
    assert model.keyword == 1.0 and model.session == 0.0  # scaled to keyword 1; unfitted signals 0
    with pytest.raises(SystemExit, match="keyword signal came out"):
        fit_fusion.model_of(-beta, ("keyword", "meaning", "person"))
