"""``python -m bench.load --node`` in its tiniest mode: real gateways and engines, one step after
another, every acknowledged write read back; and the bounds worked out from its figures. No
timing is asserted: only that it measures, counts and says what bounds a node."""

from __future__ import annotations

import pytest

from bench import load, node


@pytest.mark.slow
@pytest.mark.req("rel:load", "perf:memory")
def test_the_node_search_runs_two_tiny_steps_and_reports_the_bounds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = load.main(["--node", "--node-steps", "10,20", "--seconds", "2", "--pace", "0.1"])
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith(("| 10 |", "| 20 |"))]
    assert code == 0, text
    first = [c.strip() for c in rows[0].strip("|").split("|")]
    assert first[:2] == ["10", "1"]  # ten workspaces, one active
    rss, pss = (float(mb) for mb in first[5].split(" / "))
    assert float(first[2]) > 0 and rss > 0 and pss > 0 and float(first[6]) > 0  # calls/s, memory, fds
    assert "**Memory (a 24 GB node" in text and "**File descriptors" in text and "**Bound first" in text


def _step(workspaces: int, p99: float, gateway_fds: int, pss: float = 0.0) -> node.Step:
    active = max(1, workspaces // 10)
    return node.Step(
        workspaces, active, 50.0, 10.0, p99, 100.0, 30.0, gateway_fds, 60.0, 190.0, 9.0, 1.0, 0, 0, pss, 300.0
    )


@pytest.mark.req("rel:load", "perf:memory")
def test_the_bounds_name_the_one_a_node_meets_first() -> None:
    gib = 2**30
    # CPU: 40 held, 80 did not; memory allows thousands; descriptors likewise
    steps = [_step(20, 40.0, 20), _step(40, 80.0, 40), _step(80, 300.0, 80)]
    text = node.bounds(steps, 23 * gib, 20_000, 2)
    assert "40 workspaces held p99 ≤ 100 ms; 80 did not (p99 300 ms)" in text
    # no PSS reported: by RSS, (24 GB × 0.9 − 250 MB) ÷ 100 MB = 218 engines, 2,180 workspaces
    assert "by RSS" in text and "≈ 218 engines at once ≈ 2,180 workspaces" in text
    # by PSS (memory really used: forked engines share the template's pages) at the largest step,
    # where most engines share them: the shared processes' 300 MB and 30 MB an engine,
    # (24 GB × 0.9 − 300 MB) ÷ 30 MB = 727 engines
    shared = [_step(20, 40.0, 20, 45.0), _step(40, 80.0, 40, 30.0)]
    by_pss = node.bounds(shared, 23 * gib, 20_000, 2)
    assert (
        "by PSS at 40 workspaces):** 90 % of it less the gateway, embedder and template (300 MB) over 30 MB"
        in by_pss
    )
    assert "≈ 727 engines at once ≈ 7,270 workspaces" in by_pss
    assert text.rstrip().endswith("**Bound first on a 24 GB node with 2 cores:** CPU.")
    # 9 ms per call: 222 calls/s on 2 cores; half of it at 25 calls/s per active workspace (the
    # busiest step's) is 4.4 active workspaces, 44 in all
    assert "at most 222 calls/s on 2 cores" in text and "≈ 44 workspaces with 10 % active" in text
    # every step held: CPU is not the first bound the figures can name
    held = [_step(20, 40.0, 20), _step(40, 60.0, 400)]
    text = node.bounds(held, 23 * gib, 2_000, 2)
    assert "the bound is higher" in text
    # the gateway's 100 descriptors per active workspace: 2,000 allow 200 workspaces, before memory;
    # but no step reached the CPU bound and its extrapolation says 44 workspaces: CPU is first
    assert "allows ≈ 200 workspaces" in text
    assert text.rstrip().endswith("**Bound first on a 24 GB node with 2 cores:** CPU.")
