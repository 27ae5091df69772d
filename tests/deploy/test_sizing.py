"""One sizing table (run:docker, run:scale-out): the table in deploy/SCALING.md ("Sizing a node") is
the one source of the figures the Kubernetes manifests set; the manifests agree with it, its measured
rows with docs/benchmarks.md, its derived rows with the arithmetic, and the prose with the table."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import yaml

from tests.deploy.support import ROOT

SCALING = ROOT / "deploy" / "SCALING.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
NODE_SETS = {
    ROOT / "deploy" / "kubernetes" / "almanac.yaml": "almanac",
    ROOT / "deploy" / "kubernetes" / "cluster" / "almanac-nodes.yaml": "almanac-node",
}
POSTGRES = ROOT / "deploy" / "kubernetes" / "postgres" / "postgres.yaml"
_ROW = re.compile(r"^\| `([a-z_.]+)` \| `([^`]+)` \|", re.MULTILINE)


def table() -> dict[str, str]:
    text = SCALING.read_text(encoding="utf-8")
    block = text[text.index("<!-- sizing:start -->") : text.index("<!-- sizing:end -->")]
    rows = _ROW.findall(block)
    assert len(rows) == len({k for k, _ in rows}), "a figure appears twice in the sizing table"
    return dict(rows)


def documents(path: Any) -> dict[str, dict[str, Any]]:
    return {
        f"{d['kind']}/{d['metadata']['name']}": d
        for d in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    }


def megabytes(quantity: str) -> float:
    """A Kubernetes quantity (Mi, Gi) in decimal MB, the unit of docs/benchmarks.md."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi)", quantity)
    assert found, quantity
    return float(found.group(1)) * (1024 if found.group(2) == "Gi" else 1) * 1.048576


def container_of(sts: dict[str, Any]) -> dict[str, Any]:
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return dict(container)


def claim_size(sts: dict[str, Any]) -> str:
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    return str(claim["spec"]["resources"]["requests"]["storage"])


@pytest.mark.req("run:docker", "run:scale-out")
def test_every_almanac_statefulset_is_sized_by_the_table() -> None:
    sizes = table()
    for path, name in NODE_SETS.items():
        sts = documents(path)[f"StatefulSet/{name}"]
        container = container_of(sts)
        resources = container["resources"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        found = {
            "node.cpu.request": str(resources["requests"]["cpu"]),
            "node.cpu.limit": str(resources["limits"]["cpu"]),
            "node.memory.request": str(resources["requests"]["memory"]),
            "node.memory.limit": str(resources["limits"]["memory"]),
            "node.max_engines": str(env["ALMANAC_MAX_ENGINES"]),
            "node.volume": claim_size(sts),
        }
        assert found == {k: sizes[k] for k in found}, path.name


@pytest.mark.req("run:scale-out")
def test_the_postgresql_sample_is_sized_by_the_table() -> None:
    sizes = table()
    docs = documents(POSTGRES)
    sts = docs["StatefulSet/almanac-postgres"]
    resources = container_of(sts)["resources"]
    found = {
        "postgres.cpu.request": str(resources["requests"]["cpu"]),
        "postgres.cpu.limit": str(resources["limits"]["cpu"]),
        "postgres.memory.request": str(resources["requests"]["memory"]),
        "postgres.memory.limit": str(resources["limits"]["memory"]),
        "postgres.volume": claim_size(sts),
        "postgres.backup_volume": str(
            docs["PersistentVolumeClaim/almanac-postgres-backups"]["spec"]["resources"]["requests"]["storage"]
        ),
    }
    assert found == {k: sizes[k] for k in found}


def _bench(pattern: str) -> re.Match[str]:
    found = re.search(pattern, BENCHMARKS.read_text(encoding="utf-8"), re.DOTALL)
    assert found, f"docs/benchmarks.md no longer has the row the sizing table reads ({pattern})"
    return found


@pytest.mark.req("run:docker", "run:scale-out")
def test_the_measured_rows_are_the_benchmarks_and_the_derived_rows_follow() -> None:
    sizes = table()
    base = _bench(r"gateway \+ embedder RSS[^|]*\(MB\) \| (\d+) \+ (\d+)")
    pss = float(
        _bench(r"20 running workspaces \+ template \+ gateway \+ embedder: .*?PSS \(MB\) \| (\d+)").group(1)
    )
    disk = _bench(
        r"disk: the Markdown store \(MB\) \| ([\d.]+).*?disk: the index \(MB\) \| ([\d.]+)"
        r".*?disk: the embedding cache \(MB\) \| ([\d.]+)"
    )
    gateway = int(base.group(1)) + int(base.group(2))
    engine = round((pss - gateway) / 21)  # 20 running workspaces + the fork server's template
    workspace = round(sum(float(g) for g in disk.groups()), 1)
    assert int(sizes["measured.gateway_embedder_mb"]) == gateway
    assert int(sizes["measured.engine_mb"]) == engine
    assert float(sizes["measured.workspace_disk_mb"]) == workspace

    needed = gateway + (int(sizes["node.max_engines"]) + 1) * engine
    assert int(sizes["derived.memory_at_max_engines_mb"]) == needed
    assert needed <= megabytes(sizes["node.memory.limit"])
    assert gateway + 2 * engine <= megabytes(sizes["node.memory.request"])
    assert int(sizes["derived.workspaces_per_volume"]) == math.floor(
        megabytes(sizes["node.volume"]) / workspace
    )


@pytest.mark.req("run:scale-out")
def test_the_prose_quotes_the_table() -> None:
    """Every figure SCALING.md states beside a table key is that key's value; the paper limits use
    the same per-engine and per-workspace figures."""
    sizes = table()
    text = SCALING.read_text(encoding="utf-8")
    prose = text.replace(text[text.index("<!-- sizing:start -->") : text.index("<!-- sizing:end -->")], "")
    quoted = re.findall(
        r"([\d,.]+)(?:\s[A-Za-z]+)?\s+\(`((?:node|postgres|measured|derived)\.[a-z_.]+)`", prose
    )
    assert len(quoted) >= 6
    for number, key in quoted:
        assert float(number.replace(",", "")) == float(re.sub(r"[A-Za-z]+$", "", sizes[key])), key
    per_million = re.search(r"\((\d+) TB with indexes", prose)
    assert per_million and int(per_million.group(1)) == round(float(sizes["measured.workspace_disk_mb"]))
    # and the manifests quote no figures of their own
    for path in [*NODE_SETS, POSTGRES]:
        comments = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if "#" in line)
        assert not re.search(r"\d\s*(MB|GB|MiB|GiB)\b", comments), path.name
