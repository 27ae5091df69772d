"""The official MCP conformance suite against the engine and the gateway (engine:surface).

Which scenarios apply is read from docs/conformance.md, whose table must list exactly the scenarios
the pinned package has. The package is installed by scripts/test-setup into .tools/.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.engine.support import socket_engine
from tests.gateway.e2e import start_gateway
from tests.relay import relay

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = ROOT / ".tools" / "conformance" / "node_modules" / ".bin" / "conformance"
DOC = ROOT / "docs" / "conformance.md"
ROW = re.compile(r"^\| `([a-z0-9-]+)` \| (passes|not applicable) \|(.*)\|$")


def table() -> dict[str, tuple[str, str]]:
    rows = [ROW.match(line) for line in DOC.read_text().splitlines()]
    return {m[1]: (m[2], m[3].strip()) for m in rows if m}


def suite(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    if not CONFORMANCE.exists():
        pytest.fail(f"{CONFORMANCE} is missing: run scripts/test-setup (make test does)")
    return subprocess.run(
        [str(CONFORMANCE), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )


def applicable() -> list[str]:
    return [name for name, (result, _) in table().items() if result == "passes"]


def run_scenarios(url: str, out: Path) -> dict[str, list[dict[str, Any]]]:
    """Each applicable scenario against ``url``: its checks, by scenario."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name in applicable():
        done = suite("server", "--url", url, "--scenario", name, "-o", str(out / name))
        files = list((out / name).rglob("checks.json"))
        assert files, (
            f"{name}: no results (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
        )
        found[name] = json.loads(files[0].read_text())
        assert done.returncode == 0, f"{name} failed: {done.stdout[-3000:]}"
    return found


def assert_all_pass(results: dict[str, list[dict[str, Any]]]) -> None:
    assert set(results) == set(applicable())
    for name, checks in results.items():
        bad = [
            (c["id"], c["status"], c.get("errorMessage"))
            for c in checks
            if c["status"] in {"FAILURE", "WARNING"}
        ]
        assert not bad, (name, bad)
        assert any(c["status"] == "SUCCESS" for c in checks), (name, checks)


def test_the_docs_list_every_server_scenario_of_the_pinned_suite() -> None:
    listed = suite("list", "--server")
    assert listed.returncode == 0, listed.stderr
    scenarios = [line.strip()[2:] for line in listed.stdout.splitlines() if line.startswith("  - ")]
    rows = table()
    assert sorted(rows) == sorted(scenarios)
    for name, (result, why) in rows.items():
        assert (result == "passes") == (why == ""), f"{name}: a scenario not applicable says why"
    assert len(applicable()) >= 6
    said = DOC.read_text()  # the page's counts are the table's
    run, rest = len(applicable()), len(table()) - len(applicable())
    assert f"{len(table())} in 0.1.12" in said and f"runs exactly the {run} scenarios" in said
    assert f"not run the {rest} marked" in said and f"no more than the {run}." in said


@pytest.mark.req("engine:surface")
@pytest.mark.req("engine:mcp")
def test_the_engine_passes_the_applicable_conformance_scenarios(tmp_path: Path) -> None:
    sock = tmp_path / "e.sock"
    with socket_engine(tmp_path / "ws", sock), relay(sock) as url:
        results = run_scenarios(url + "/mcp", tmp_path / "results")
    assert_all_pass(results)


@pytest.mark.req("engine:surface")
@pytest.mark.req("gw:route")
def test_the_gateway_passes_the_applicable_conformance_scenarios(tmp_path: Path) -> None:
    gateway = start_gateway(tmp_path / "data", tmp_path / "gateway.log")
    try:
        gateway.owner("ada@example.com")
        token = gateway.token("ada@example.com", "conformance")
        address = urlsplit(gateway.url)
        target = (address.hostname or "127.0.0.1", address.port or 80)
        with relay(target, {"Authorization": f"Bearer {token}"}) as url:
            results = run_scenarios(url + "/mcp", tmp_path / "results")
    finally:
        gateway.stop()
    assert_all_pass(results)
