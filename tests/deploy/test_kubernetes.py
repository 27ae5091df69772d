"""deploy/kubernetes (run:docker): valid against the Kubernetes schemas (offline), probes on the
gateway's real health endpoints, data on a persistent volume, memory sized from the benchmarks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.support import ROOT, tool

MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))


def documents() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            found[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return found


def mebibytes(quantity: str) -> float:
    found = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi)", quantity)
    assert found, quantity
    return float(found.group(1)) * (1024 if found.group(2) == "Gi" else 1)


@pytest.mark.req("run:docker")
def test_manifests_pass_kubernetes_validate(tmp_path: Path) -> None:
    assert MANIFESTS
    result = tool("kubernetes-validate", "--strict", "--quiet", *map(str, MANIFESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        MANIFESTS[0].read_text(encoding="utf-8").replace("containerPort: 8080", "containerPort: http")
    )
    assert tool("kubernetes-validate", "--strict", "--quiet", str(bad)).returncode != 0


@pytest.mark.req("run:docker")
def test_the_statefulset_probes_stores_and_is_sized_from_the_benchmarks() -> None:
    docs = documents()
    assert {"Service/almanac", "Ingress/almanac", "NetworkPolicy/almanac"} <= set(docs)
    (sts,) = [d for d in docs.values() if d["kind"] == "StatefulSet"]
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == env["ALMANAC_DATA_DIR"]
    assert pod["securityContext"]["runAsNonRoot"] is True

    # memory really used (PSS) by gateway + embedder, and per running workspace, from docs/benchmarks.md
    bench = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    base = re.search(r"gateway \+ embedder RSS[^|]*\(MB\) \| (\d+) \+ (\d+)", bench)
    row = r"20 running workspaces \+ template \+ gateway \+ embedder: .*?PSS \(MB\) \| (\d+)"
    total = re.search(row, bench)
    assert base and total, "docs/benchmarks.md no longer has the gateway memory rows this sizing reads"
    gateway, embedder = float(base.group(1)), float(base.group(2))
    pss = float(total.group(1))
    per_engine = (pss - gateway - embedder) / 21  # 20 workspaces + the fork server's template
    engines = int(env["ALMANAC_MAX_ENGINES"]) + 1
    needed_mb = gateway + embedder + engines * per_engine
    resources = container["resources"]
    assert mebibytes(resources["limits"]["memory"]) * 1.048576 >= needed_mb
    assert mebibytes(resources["requests"]["memory"]) * 1.048576 >= gateway + embedder + 2 * per_engine
