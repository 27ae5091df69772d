"""deploy/kubernetes/cluster (run:scale-out): the StatefulSet of nodes is valid against the Kubernetes
schemas (offline), and what it hands each pod is a configuration the real settings loader accepts as
a node — stable per-pod names advertised at their headless-service DNS names, its own persistent
volume, PostgreSQL from a Secret."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.settings import load_settings, setting_names
from tests.deploy.support import ROOT, tool

CLUSTER = sorted((ROOT / "deploy" / "kubernetes" / "cluster").glob("*.yaml"))
EVERY_MANIFEST = sorted((ROOT / "deploy" / "kubernetes").rglob("*.yaml"))


def documents(paths: list[Path]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            found[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return found


def the_node_set() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = documents(CLUSTER)
    (sts,) = [d for d in docs.values() if d["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return sts, container


def pod_env(sts: dict[str, Any], container: dict[str, Any], ordinal: int) -> dict[str, str]:
    """The environment Kubernetes gives pod `ordinal`: field refs resolved, `$(VAR)` expanded from
    the variables defined before it (as the kubelet does), secrets replaced by stand-ins."""
    pod_name = f"{sts['metadata']['name']}-{ordinal}"
    secrets = {
        "database-url": "postgresql://almanac:pw@postgres.example.internal:5432/almanac",
        "cluster-secret": "0123456789abcdef" * 4,
    }
    env: dict[str, str] = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], var["value"])
        elif "fieldRef" in var["valueFrom"]:
            assert var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            env[var["name"]] = pod_name
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = secrets.get(ref["key"], f"stand-in for {ref['name']}/{ref['key']}")
    return env


@pytest.mark.req("run:scale-out")
def test_the_cluster_manifests_pass_kubernetes_validate(tmp_path: Path) -> None:
    assert CLUSTER
    result = tool("kubernetes-validate", "--strict", "--quiet", *map(str, CLUSTER))
    assert result.returncode == 0, result.stdout + result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(CLUSTER[0].read_text(encoding="utf-8").replace("maxUnavailable: 1", "maxUnavailable: []"))
    assert tool("kubernetes-validate", "--strict", "--quiet", str(bad)).returncode != 0


def test_every_almanac_variable_in_the_manifests_is_a_real_setting() -> None:
    # the loader ignores unknown ALMANAC_ variables, so a misspelt one would silently do nothing
    names = set(setting_names())
    for path in EVERY_MANIFEST:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            spec = doc.get("spec", {}).get("template", {}).get("spec", {})
            for container in spec.get("containers", []):
                for var in container.get("env", []):
                    if var["name"].startswith("ALMANAC_"):
                        assert var["name"][len("ALMANAC_") :].lower() in names, (path.name, var["name"])


@pytest.mark.req("run:scale-out")
def test_each_pod_is_a_node_the_settings_loader_accepts_with_its_own_volume_and_stable_name() -> None:
    sts, container = the_node_set()
    docs = documents(CLUSTER)
    headless = docs[f"Service/{sts['spec']['serviceName']}"]
    assert headless["spec"]["clusterIP"] == "None"
    namespace = sts["metadata"]["namespace"]
    port = container["ports"][0]["containerPort"]
    assert sts["spec"]["replicas"] >= 3

    seen = set()
    for ordinal in range(sts["spec"]["replicas"]):
        settings = load_settings(env=pod_env(sts, container, ordinal))
        pod_name = f"{sts['metadata']['name']}-{ordinal}"
        assert settings.node == pod_name
        expected = f"http://{pod_name}.{headless['metadata']['name']}.{namespace}.svc.cluster.local:{port}"
        assert settings.advertise_url == expected
        assert settings.database_url is not None and settings.database_url.startswith("postgresql://")
        assert settings.cluster_secret == "0123456789abcdef" * 4
        seen.add(settings.advertise_url)
    assert len(seen) == sts["spec"]["replicas"]  # every node reachable at its own address

    # the control plane's address (with its password) and the cluster secret come from a Secret
    for name in ("ALMANAC_DATABASE_URL", "ALMANAC_CLUSTER_SECRET"):
        (var,) = [v for v in container["env"] if v["name"] == name]
        assert "secretKeyRef" in var["valueFrom"], name
    # each node keeps its workspaces on its own persistent volume
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert Path(mounts[claim["metadata"]["name"]]) == load_settings(env=pod_env(sts, container, 0)).data_dir


def test_the_front_service_reaches_every_node_and_nodes_may_reach_each_other() -> None:
    sts, _ = the_node_set()
    docs = documents(CLUSTER)
    labels = sts["spec"]["template"]["metadata"]["labels"]
    front = docs["Service/almanac"]
    assert front["spec"].get("clusterIP") != "None"
    assert front["spec"]["selector"].items() <= labels.items()
    policy = docs["NetworkPolicy/almanac-node"]
    peers = [p for rule in policy["spec"]["ingress"] for p in rule["from"] if "podSelector" in p]
    assert any(p["podSelector"]["matchLabels"].items() <= labels.items() for p in peers)
    assert docs["PodDisruptionBudget/almanac-node"]["spec"]["maxUnavailable"] == 1


@pytest.mark.req("run:scale-out")
def test_a_control_plane_outage_does_not_take_every_node_out_of_the_service() -> None:
    """Readiness is /healthz, which a node answers while PostgreSQL is down (/readyz does not:
    tests/gateway/cluster/test_control_plane_down.py); every node unready at once would leave the
    Service nothing to send even the calls the nodes can still serve to."""
    _, container = the_node_set()
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
