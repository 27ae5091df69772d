"""The answer check beside ``bench.locomo``'s recall@10: does the first ten hold the answer's words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import answers, locomo, misses
from tests.bench.test_bench_smoke import fake_locomo

TURNS = [
    ("D1:1", "I just signed up for a pottery class yesterday. It's like therapy for me."),
    ("D1:2", "I love painting classes."),
    ("D5:3", "Pottery's so relaxing, I made a bowl in class."),
    ("D6:1", "The weather was lovely at the beach."),
]
HOLDING = misses.Stems(TURNS).holding  # which turns hold a word, as the index's tokenizer reads it


@pytest.mark.req("quality:locomo")
def test_another_mention_of_the_answer_counts_where_the_label_does_not() -> None:
    # the first ten miss the labelled turn (recall 0) but hold another mention of the answer
    found = answers.check("Pottery class", HOLDING, ["D1:1"], ["D6:1", "D5:3"], recall=0.0)
    assert found == answers.AnswerCheck(checkable=True, words=1.0, whole=True, recall=0.0)
    # half the answer's words ("classes" and "class" are one stem; "painting" is not there)
    half = answers.check("painting classes", HOLDING, ["D1:2"], ["D5:3"], recall=0.0)
    assert half is not None and half.words == 0.5 and not half.whole
    # nothing of the answer in the first ten
    none = answers.check("Pottery", HOLDING, ["D1:1"], ["D6:1"], recall=0.0)
    assert none is not None and none.words == 0.0 and not none.whole


@pytest.mark.req("quality:locomo")
def test_answers_the_labelled_turns_do_not_word_are_not_checked() -> None:
    # a date worked out from the session's day: the labelled turn says "yesterday"
    dated = answers.check("7 May 2023", HOLDING, ["D1:1"], ["D1:1"], recall=1.0)
    assert dated is not None and not dated.checkable
    assert answers.check("2", HOLDING, ["D1:1"], ["D1:1"], recall=1.0) is None  # no searchable word
    tally = answers.AnswerTally()
    tally.add(1, answers.check("Pottery", HOLDING, ["D1:1"], ["D5:3"], recall=0.0))
    tally.add(1, answers.check("pottery class", HOLDING, ["D1:1"], ["D6:1"], recall=0.5))
    tally.add(2, dated)
    tally.add(4, None)
    summary = tally.summary()
    assert summary["all"] == {"n": 2, "asked": 3, "R@10": 25.0, "answer_words": 50.0, "whole_answer": 50.0}
    assert summary["c1"]["n"] == 2 and summary["c2"] == {
        "n": 0,
        "asked": 1,
        "R@10": 0.0,
        "answer_words": 0.0,
        "whole_answer": 0.0,
    }


@pytest.mark.req("quality:locomo")
def test_the_locomo_bench_reports_the_answer_check_beside_fts5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "locomo.json"
    fake_locomo(data)
    out = tmp_path / "result.json"
    assert locomo.main([str(data), "--no-context", "--json", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    # the made-up data answers "Marguerite" (single-hop, in its labelled turn), "A beagle"
    # (multi-hop, in its labelled turn) and "20 June 2023" (temporal: its turn does not say it)
    held, fts5 = result["answers"], result["fts5_answers"]
    assert held["all"]["asked"] == 9 and held["all"]["n"] == 6
    assert held["c2"]["n"] == 0 and held["c1"]["n"] == 3 and held["c4"]["n"] == 3
    assert held["all"]["answer_words"] >= held["all"]["whole_answer"] > 0
    assert fts5["all"]["n"] == 6
    assert "answer in the first ten" in capsys.readouterr().out
