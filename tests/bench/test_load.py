"""``python -m bench.load`` runs in its tiniest mode: real gateways, real engines, the real ``mcp``
client, every acknowledged write read back; the table lands in its own section of a docs file.
No timing is asserted: only that the bench measures, counts and checks what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import crowd, load

pytestmark = pytest.mark.slow


@pytest.mark.req("rel:load")
def test_the_load_bench_runs_two_tiny_rows_and_writes_its_section(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n", encoding="utf-8")
    argv = ["--rows", "2x1:mixed,2x2:writes:limited", "--seconds", "2", "--in-process-calls", "5"]
    # a limit low enough that two clients meet it: the 429s are counted apart, not as errors
    code = load.main([*argv, "--rate-limit", "10/5", "--write-docs", str(docs)])
    assert code == 0
    text = docs.read_text(encoding="utf-8")
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in text
    assert text.count(load.START) == 1 and load.HEADING in text
    rows = [line for line in text.splitlines() if line.startswith("| 2 × ")]
    assert len(rows) == 2
    one, two = ([c.strip() for c in row.strip("|").split("|")] for row in rows)
    assert one[:3] == ["2 × 1", "mixed", "off"] and two[:3] == ["2 × 2 (sleeping and waking)", "writes", "on"]
    for cells in (one, two):
        assert float(cells[3]) > 0  # calls/s
        acked, lost = (int(x) for x in cells[9].split(" / "))
        assert acked > 0 and lost == 0 and cells[10] == "0"
    assert int(two[8]) > 0  # 429s, with a limit of 10 calls/s per token, burst 5
    # a second run replaces the section rather than adding one
    assert load.main(["--rows", "1x1:reads", *argv[2:], "--write-docs", str(docs)]) == 0
    again = docs.read_text(encoding="utf-8")
    assert again.count(load.START) == 1 and "| 1 × 1 | reads | off |" in again


def test_a_row_is_parsed_or_refused_with_what_to_write() -> None:
    assert crowd.Row.parse("32x16:mixed:limited") == crowd.Row(32, 16, "mixed", True)
    assert crowd.Row.parse("8x1:reads").sleeping is False
    for bad in ("8x1", "8x1:everything", "2x4:mixed", "0x0:reads"):
        with pytest.raises(ValueError, match=r"CLIENTSxWORKSPACES|at least one"):
            crowd.Row.parse(bad)


def test_the_full_table_has_every_row_the_issue_names() -> None:
    rows = [crowd.Row.parse(name) for name in load.FULL]
    one = {(r.clients, r.mix) for r in rows if r.workspaces == 1 and not r.limited}
    assert one == {(n, mix) for n in (1, 2, 8, 32) for mix in load.MIXES}
    assert {r.workspaces for r in rows if r.sleeping} == {4, 16, 50}
    assert any(r.limited for r in rows) and any(not r.limited for r in rows)


@pytest.mark.req("rel:load")
def test_cpu_is_counted_process_by_process_and_an_engine_gone_makes_a_lower_bound() -> None:
    before = {("clients", 1): 1.0, ("gateway", 2): 2.0, ("engines", 3): 5.0, ("engines", 4): 7.0}
    after = {("clients", 1): 1.5, ("gateway", 2): 2.25, ("engines", 4): 7.5, ("engines", 5): 0.25}
    spent, gone = crowd.cpu_in_window(before, after)
    assert spent == {"clients": 0.5, "gateway": 0.25, "engines": 0.75}  # never the sleeper's 5 s
    assert gone
    same = {**before, ("engines", 3): 6.0}
    assert crowd.cpu_in_window(before, same) == ({"clients": 0.0, "gateway": 0.0, "engines": 1.0}, False)


@pytest.mark.req("rel:load")
def test_a_row_with_a_target_says_no_when_it_misses_it() -> None:
    row = crowd.Row.parse("8x1:mixed")
    slow = crowd.Outcome(row, 10.0, latencies=[0.01] * 98 + [0.2] * 2)
    slow.elapsed = 10.0
    assert (
        "| 8 × 1 mixed | ≥ 400 calls/s, p99 ≤ 50 ms | 10 calls/s, p99 200.0 ms | **no** |"
        in load.verdicts([slow])
    )
    fast = crowd.Outcome(row, 1.0, latencies=[0.01] * 500)
    fast.elapsed = 1.0
    assert load.verdicts([fast]).rstrip().endswith("| yes | - |")
    assert load.verdicts([crowd.Outcome(crowd.Row.parse("2x1:reads"), 1.0, latencies=[0.01])]) == ""


@pytest.mark.req("rel:load")
def test_a_missed_target_says_why_from_the_rows_own_cpu_per_call() -> None:
    row = crowd.Row.parse("8x1:mixed")
    o = crowd.Outcome(row, 10.0, latencies=[0.01] * 2000)
    o.elapsed = 10.0  # 200 calls/s
    o.cpu = {"clients": 4.0, "gateway": 1.0, "engines": 5.0, "embedder": 10.0}  # 10 ms a call
    line = load.verdicts([o], cores=2)
    assert "| **no** |" in line
    assert "a call cost 10.0 ms of CPU (clients 2.0, gateway 0.5, engines 2.5, embedder 5.0)" in line
    assert "2 cores carry at most 200 calls/s at that cost, 400 calls/s needs ≤ 5.0 ms a call" in line
    assert "the cores were 100% busy" in line
    o.engines_gone = True
    o.wakes = [4.0, 5.0, 6.0]
    woke = load.verdicts([o], cores=2)
    assert "a call cost ≥ 10.0 ms" in woke and "3 calls waited for an engine to start (p50 5000 ms)" in woke
