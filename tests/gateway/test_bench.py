"""The gateway benchmark runs end to end, tiny (perf:gateway, perf:cold-start, perf:memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.gateway import HEADING, main, met, write_section


def test_write_section_replaces_only_its_own_section(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Engine\n\nkeep me\n", encoding="utf-8")
    write_section(doc, HEADING + "\n\nfirst\n")
    write_section(doc, HEADING + "\n\nsecond\n")
    text = doc.read_text(encoding="utf-8")
    assert "keep me" in text and "second" in text and "first" not in text
    assert text.count(HEADING) == 1
    doc.write_text(text + "\n<!-- later:start -->\n## Later\n\nalso kept\n", encoding="utf-8")
    write_section(doc, HEADING + "\n\nthird\n")
    text = doc.read_text(encoding="utf-8")
    assert "also kept" in text and "keep me" in text and "third" in text and "second" not in text
    assert "<!-- later:start -->\n## Later" in text
    bare = tmp_path / "bare.md"  # a section written before the markers existed
    bare.write_text(f"# B\n\n{HEADING}\n\nold\n<!-- other:start -->\n## Other\n\nkept\n", encoding="utf-8")
    write_section(bare, HEADING + "\n\nnew\n")
    text = bare.read_text(encoding="utf-8")
    assert "old" not in text and "new" in text and "<!-- other:start -->\n## Other\n\nkept" in text


@pytest.mark.slow
@pytest.mark.req("perf:gateway", "perf:cold-start", "perf:memory")
def test_the_benchmark_runs_tiny_and_writes_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "benchmarks.md"
    argv = ["--calls", "3", "--workspaces", "2", "--cold", "1", "--long-notes", "2", "--out", str(out)]
    assert main(argv) == 0
    text = out.read_text(encoding="utf-8")
    assert HEADING in text
    for row in ("in-process, no transport", "through the gateway", "straight to the engine socket",
                "engine socket overhead", "gateway overhead", "CPU per call", "cold start", "idle engine RSS",
                "running workspaces", "long notes", "PSS mean"):  # fmt: skip
        assert row in text, row
    for client in ("mcp client", "lean client"):
        for row in ("straight to the engine socket", "through the gateway", "engine socket overhead at p50",
                    "gateway overhead at p50"):  # fmt: skip
            assert f"{row}, {client}" in text, (row, client)
        assert f"the gateway process's own CPU per call, {client}, its engine excluded" in text, client
    for row in ("straight to the engine socket", "engine socket overhead at p50"):
        assert f"{row}, gateway's engine client" in text, row
    assert "through the gateway, gateway's engine client" not in text  # that client speaks to sockets
    for client in ("mcp client", "lean client", "gateway's engine client"):  # the caller's share, apart
        for tool in ("remember", "get_context"):
            row = f"`{tool}` of which the {client}'s own CPU per call, straight to the socket (ms) | "
            value = text.split(row, 1)[1].split(" |", 1)[0]
            assert float(value) > 0, (client, tool)
    assert HEADING in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.req("perf:gateway")
def test_the_engine_cpu_mode_prints_cpu_per_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--engine-cpu", "--calls", "3"]) == 0
    out = capsys.readouterr().out
    for tool in ("remember", "get_context"):
        row = next(line for line in out.splitlines() if line.startswith(f"| `{tool}` engine CPU per call"))
        loop_ms, whole_ms = (float(v) for v in row.split("|")[2].split("/"))
        assert loop_ms >= 0 and whole_ms >= 0  # /proc counts in ticks: 3 calls may read as 0
        switched = next(
            ln for ln in out.splitlines() if ln.startswith(f"| `{tool}` engine wake-ups per call")
        )
        loop_switches, all_switches = (float(v) for v in switched.split("|")[2].split("/"))
        assert 0 < loop_switches <= all_switches  # each call wakes the engine's loop at least once


@pytest.mark.slow
@pytest.mark.req("perf:gateway")
def test_the_gateway_cpu_mode_prints_the_gateway_process_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--gateway-cpu", "--calls", "3"]) == 0
    out = capsys.readouterr().out
    for tool in ("remember", "get_context"):
        row = next(line for line in out.splitlines() if line.startswith(f"| `{tool}` gateway process alone"))
        loop_ms, whole_ms = (float(v) for v in row.split("|")[2].split("/"))
        assert loop_ms >= 0 and whole_ms >= 0  # /proc counts in ticks: 3 calls may read as 0
        switched = next(ln for ln in out.splitlines() if ln.startswith(f"| `{tool}` gateway process alone, "
                        "lean client, wake-ups per call"))  # fmt: skip
        loop_switches, all_switches = (float(v) for v in switched.split("|")[2].split("/"))
        assert 0 < loop_switches <= all_switches  # a proxied call wakes the gateway's loop at least once


def test_met_compares_a_rows_first_figure_with_the_target_in_its_label() -> None:
    assert met("`remember` engine socket overhead at p50 (ms; target ≤ 2)", "1.40") == "yes"
    assert met("`remember` engine socket overhead at p50 (ms; target ≤ 2)", "18.06") == "no"
    assert met("cold start, p50 / max of 5 (ms; target ≤ 1000)", "1446 / 1857") == "no"
    assert met("gateway overhead (ms; target ≤ 3)", "-0.5").startswith("no reading")  # noise, not a pass
    assert met("`remember` p50 / p95 in-process (ms)", "16.23 / 47.66") == ""  # no target
