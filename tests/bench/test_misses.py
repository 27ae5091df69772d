"""The miss analysis behind ``bench.locomo --misses``: each missed evidence turn, its rank and tags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import locomo, misses
from tests.bench.test_bench_smoke import fake_locomo

TURNS = [
    ("D1:1", "Let's go to the lake on Sunday, it'll be fun!"),
    ("D1:2", "Yeah! Let's do it. It'll be a fun experience!"),
    ("D1:3", "I painted a sunset for the art show."),
    ("D1:4", "My pottery class meets on Mondays."),
    ("D1:5", "I went painting by the river."),
    *[(f"D2:{i}", f"Filler turn number {i} about nothing much.") for i in range(1, 15)],
]


@pytest.mark.req("quality:locomo")
def test_each_missed_turn_gets_its_rank_and_what_may_explain_it() -> None:
    ranked = ["D1:1", "D1:3", *[f"D2:{i}" for i in range(1, 12)], "D1:4", "D1:2"]
    questions = [
        ("What places did Ann and Bo plan to visit?", 1, ("D1:1", "D1:2")),  # D1:2: a list's second turn
        ("What kind of art does Ann make?", 3, ("D1:4",)),  # no shared word; D1:3 ranks instead
        ("When did Ann go painting?", 2, ("D1:5",)),  # not among the ranked at all
    ]
    found = misses.analyse("conv-x", TURNS, questions, lambda q: ranked)
    by_turn = {m.turn: m for m in found}
    assert set(by_turn) == {"D1:2", "D1:4", "D1:5"}  # D1:1 is in the first ten: no miss
    assert by_turn["D1:2"].rank == 15 and by_turn["D1:2"].primary == "list"
    assert {"list", "no-overlap", "pronoun"} <= set(by_turn["D1:2"].tags)
    assert by_turn["D1:4"].rank == 14 and by_turn["D1:4"].primary == "neighbour"
    assert "no-overlap" in by_turn["D1:4"].tags and "pronoun" not in by_turn["D1:4"].tags
    assert by_turn["D1:5"].rank is None and by_turn["D1:5"].primary == "date"  # shares "painting"
    summary = misses.summary(found, evidence_total=4)
    assert summary["missed"] == 3 and summary["primary"]["list"] == 1
    assert summary["ranks"]["≤ 20"] == 2 and summary["ranks"][f"> {misses.DEEP}"] == 1
    assert summary["reorder_ceiling"] == {}  # not asked for without the number of questions


@pytest.mark.req("quality:locomo")
def test_the_reorder_ceiling_is_what_a_perfect_reranker_of_the_first_k_would_reach() -> None:
    ranked = [*[f"D2:{i}" for i in range(1, 14)], "D1:4", *[f"D3:{i}" for i in range(1, 50)], "D1:2"]
    questions = [
        ("What places did Ann and Bo plan to visit?", 1, ("D1:1", "D1:2")),  # ranks: none, 64
        ("What kind of art does Ann make?", 3, ("D1:4",)),  # rank 14
        ("Who teaches pottery?", 4, ("D2:1",)),  # rank 1: no miss
    ]
    found = misses.analyse("conv-x", TURNS, questions, lambda q: ranked)
    assert sorted((m.turn, m.rank) for m in found) == [("D1:1", None), ("D1:2", 64), ("D1:4", 14)]
    # first 20 put in the best order: the art question is answered, the places question is not
    assert misses.ceiling(found, questions=3, cut=20) == round(100 * (0 + 1 + 1) / 3, 1)
    # the first 100: one of the places question's two turns too
    assert misses.ceiling(found, questions=3, cut=100) == round(100 * (0.5 + 1 + 1) / 3, 1)
    assert misses.ceiling(found, questions=3, cut=5) == round(100 * 1 / 3, 1)
    summary = misses.summary(found, evidence_total=4, questions=3)
    assert summary["reorder_ceiling"] == {"20": 66.7, "50": 66.7, "100": 83.3, "200": 83.3}


@pytest.mark.req("quality:locomo")
def test_the_bench_writes_the_misses_per_half(tmp_path: Path) -> None:
    data, out = tmp_path / "locomo.json", tmp_path / "misses.json"
    fake_locomo(data)
    assert locomo.main([str(data), "--no-context", "--misses", str(out)]) == 0
    found = json.loads(out.read_text(encoding="utf-8"))["speaker"]
    assert set(found) == {"A", "B"}
    assert found["B"]["summary"]["evidence_turns"] == 9  # the made-up conversations are all half B
    assert found["B"]["summary"]["missed"] == len(found["B"]["misses"])
