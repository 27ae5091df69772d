"""The benchmarks run (tiny): LoCoMo-format data made up here, and a small latency workspace."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import control, latency, locomo
from tests.pg import PostgresServer


def fake_locomo(path: Path) -> None:
    def session(n: int, lines: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"speaker": s, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (s, t) in enumerate(lines)]

    convs = []
    for k, (a, b, topic) in enumerate(
        [("Ann", "Bo", "pottery"), ("Cy", "Di", "sailing"), ("Ed", "Flo", "chess")]
    ):
        conv = {
            "speaker_a": a,
            "speaker_b": b,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session(
                1,
                [
                    (a, f"I started a {topic} class last week!"),
                    (b, "How is it going?"),
                    (a, f"Great, my {topic} teacher is called Marguerite."),
                ],
            ),
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": session(
                2,
                [
                    (b, "I adopted a puppy named Biscuit."),
                    (a, "So cute! What breed?"),
                    (b, "A beagle, she loves the park."),
                ],
            ),
        }
        qa = [
            {
                "question": f"Who teaches {a}'s {topic} class?",
                "evidence": ["D1:3"],
                "category": 4,
                "answer": "Marguerite",
            },
            {
                "question": f"When did {b} adopt a puppy?",
                "evidence": ["D2:1; D2:01"],
                "category": 2,
                "answer": "20 June 2023",
            },
            {
                "question": f"What breed is {b}'s dog?",
                "evidence": ["D2:3", "D9:99"],
                "category": 1,
                "answer": "A beagle",
            },
            {"question": "unanswerable", "evidence": ["D1:1"], "category": 5},
        ]
        convs.append({"sample_id": f"conv-{k}", "conversation": conv, "qa": qa})
    path.write_text(json.dumps(convs), encoding="utf-8")


@pytest.mark.req("quality:locomo", "quality:honest-miss")
@pytest.mark.parametrize("mode", ["engine", "mcp"])
def test_locomo_bench_runs_and_reports(tmp_path: Path, mode: str) -> None:
    data = tmp_path / "locomo.json"
    fake_locomo(data)
    out = tmp_path / "result.json"
    assert locomo.main([str(data), "--mode", mode, "--json", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["all"]["n"] == 9 and result["fts5_reference"]["n"] == 9
    assert result["all"]["R@10"] >= 80
    assert result["honest_miss"]["own_relevant_true"] >= 60
    assert result["honest_miss"]["wrong_relevant_false"] is not None
    listed = result["listed"]  # what get_context lists, own conversation / another (a miss)
    assert listed["own"] > 0 and listed["wrong"] is not None and 0 <= listed["wrong_empty"] <= 100


@pytest.mark.req("quality:honest-miss")
def test_locomo_bench_measures_get_context_at_a_given_floor(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    fake_locomo(data)
    runs = []
    for floor in ("0", "1"):
        out = tmp_path / f"floor-{floor}.json"
        assert locomo.main([str(data), "--floor", floor, "--json", str(out)]) == 0
        runs.append(json.loads(out.read_text(encoding="utf-8")))
    assert [r["match_floor"] for r in runs] == [0.0, 1.0]
    assert runs[1]["listed"]["own"] < runs[0]["listed"]["own"]  # nothing matches perfectly here
    assert runs[1]["all"] == runs[0]["all"]  # the floor is get_context's; the search is not floored


@pytest.mark.req("quality:layouts")
def test_locomo_bench_runs_every_layout_with_fts5_on_the_same_texts(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    fake_locomo(data)
    out = tmp_path / "result.json"
    assert locomo.main([str(data), "--mode", "mcp", "--layout", "all", "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert [r["layout"] for r in results] == list(locomo.LAYOUTS)
    for r in results:
        assert r["all"]["n"] == 9 and r["fts5_reference"]["n"] == 9 and r["get_context"]["n"] == 9
        assert r["honest_miss"]["wrong_relevant_false"] is not None
    assert locomo.main([str(data), "--layout", "sideways"]) == 2
    assert locomo.main([str(data), "--layout", "checks", "--no-context", "--json", str(out)]) == 0
    assert [r["layout"] for r in json.loads(out.read_text(encoding="utf-8"))] == list(locomo.CHECKS)


def test_layouts_word_the_same_turn_differently_and_the_mix_is_stable() -> None:
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    texts = {name: locomo.render(name, "Ann", "I like clay.", when, "c/D1:1") for name in locomo.LAYOUTS}
    assert texts["speaker"] == "Ann: I like clay."
    assert texts["date-first"].startswith("8 May 2023") and "Ann: I like clay." in texts["date-first"]
    assert texts["third-person"] == "On 8 May 2023, Ann said that I like clay."
    assert texts["plain"] == "I like clay."
    assert texts["mix"] in [texts[n] for n in locomo.LAYOUTS[:4]]
    assert texts["mix"] == locomo.render("mix", "Ann", "I like clay.", when, "c/D1:1")
    picks = {locomo.render("mix", "Ann", "x", when, f"c/D1:{i}") for i in range(40)}
    assert len(picks) == 4  # every layout appears in the mix
    checks = {name: locomo.render(name, "Ann", "I like clay.", when, "c/D1:1") for name in locomo.CHECKS}
    assert checks == {
        "speaker-last": "I like clay. (Ann, 8 May 2023)",
        "bracket-said": "[2023-05-08] Ann said: I like clay.",
        "wrote-quote": 'Ann wrote: "I like clay."',
    }


def test_evidence_ids_are_normalised() -> None:
    known = {"D8:6", "D9:17", "D30:5", "D11:26"}
    assert locomo.normalise_evidence(["D8:6; D9:17", "D30:05", "D:11:26", "D", "D99:1"], known) == (
        "D8:6",
        "D9:17",
        "D30:5",
        "D11:26",
    )


@pytest.mark.req("perf:context-small", "perf:context-large", "perf:write")
def test_latency_bench_runs_tiny(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(latency, "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text("# Benchmarks\n\n## Gateway\nkept\n", encoding="utf-8")
    args = ["--queries", "20", "--small-notes", "3", "--small-chars", "3000", "--facts", "20"]
    keep = ["--large-chunks", "200", "--keep", str(tmp_path / "keep")]
    assert latency.main([*args, *keep, "--write-docs"]) == 0
    text = (tmp_path / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "## Gateway\nkept" in text and "get_context hybrid" in text and "remember" in text
    assert "| met? |" in text and "through the host embedder service" in text
    assert "20 of 20 replies identical" in text  # the fast hybrid path answers as the plain one
    # remember at the large shape against the live shape, same embedder, with its ratio and target
    ratio = re.search(
        r"\| remember \(durable note \+ FTS rows\) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ≤ 2×", text
    )
    assert ratio is not None
    live_ms, large_ms, times = map(float, ratio.groups())
    assert times == pytest.approx(large_ms / live_ms, abs=0.01)
    assert "built and indexed in" in text and (tmp_path / "keep" / "large" / ".index").is_dir()
    # the large workspace's starts: after a clean stop (the comparison skipped) and without the mark
    starts = latency.earlier_block(text, latency.STARTS_TITLE)
    assert starts is not None
    clean, unmemo, unmarked = (
        [float(x) for x in re.findall(r"\| ([\d.]+)", line)[:4]]
        for line in starts.splitlines()
        if line.startswith(("| after a clean stop", "| without the YAML memo", "| without the mark"))
    )
    for store, index, compare, total in (clean, unmemo, unmarked):  # the parts add up to the whole
        assert total == pytest.approx(store + index + compare, abs=0.02)
    assert "≤ 1 s" in starts and "| met? |" in starts
    capsys.readouterr()
    assert latency.main([*args, *keep]) == 0  # the kept workspace is reused, not rebuilt
    assert "kept from an earlier run" in capsys.readouterr().out
    large = latency.earlier_table(text, live=False)
    assert large is not None and "get_context keyword" in large[2]
    assert latency.main([*args, "--large-chunks", "0", "--write-docs"]) == 0
    again = (tmp_path / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert again.count(latency.START) == 1
    assert latency.earlier_table(again, live=False) == (*large[:3], latency.KEPT)  # kept, said so
    assert latency.KEPT in again
    kept_starts = latency.earlier_block(again, latency.STARTS_TITLE)
    assert kept_starts is not None and kept_starts.strip() == starts.strip()


@pytest.mark.req("perf:rebuild")
def test_rebuild_bench_runs_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import rebuild

    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Gateway\nkept\n", encoding="utf-8")
    monkeypatch.setattr(rebuild, "DOCS", docs)
    assert rebuild.main(["--notes", "3", "--chars", "2000", "--facts", "5", "--write-docs"]) == 0
    text = docs.read_text(encoding="utf-8")
    assert "## Gateway\nkept" in text and "--reindex`, whole process" in text
    sizes = {m[0]: float(m[1]) for m in re.findall(r"\| disk: (.+?) \(MB\) \| ([\d.]+) \|", text)}
    assert set(sizes) == {"the Markdown store", "the index", "the embedding cache"}
    assert all(size > 0 for size in sizes.values())


def test_control_plane_bench_runs_on_both_databases(tmp_path: Path, postgres: PostgresServer) -> None:
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n", encoding="utf-8")
    assert (
        control.main(["--calls", "5", "--database-url", postgres.create_database(), "--out", str(out)]) == 0
    )
    text = out.read_text(encoding="utf-8")
    assert "kept" in text and "<!-- control-plane:start -->" in text
    for op in ("authenticate", "touch", "session_by_secret", "create_pat"):
        assert f"| `{op}` |" in text
    assert "SQLite" in text and "PostgreSQL" in text


def test_locomo_path_found_from_any_checkout_or_named_by_env(tmp_path: Path) -> None:
    from bench import paths

    data = tmp_path / "work" / paths.RELATIVE
    data.parent.mkdir(parents=True)
    data.write_text("[]", encoding="utf-8")
    worktree = tmp_path / "work" / "wt" / "someone"
    worktree.mkdir(parents=True)
    assert paths.locomo_path({}, worktree) == data  # a worktree two folders down finds it
    assert paths.locomo_path({}, tmp_path / "work" / "main") == data
    named = tmp_path / "elsewhere.json"
    assert paths.locomo_path({paths.ENV: str(named)}, worktree) == named  # the variable wins
    missing = paths.locomo_path({}, tmp_path / "other")
    assert not missing.exists() and missing.name == "locomo10_dev.json"
