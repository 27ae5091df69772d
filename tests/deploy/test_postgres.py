"""deploy/kubernetes/postgres (run:scale-out): the PostgreSQL sample is valid against the Kubernetes
schemas (offline) and wired to the nodes; and the restore drill, for real: the sample's own backup
script (its CronJob's) dumps a real PostgreSQL control plane that a real node uses, the database is
dropped, the restore steps of deploy/SCALING.md bring it back, and the node started again accepts the
token minted before and serves the memory written before."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import psycopg
import pytest
import yaml

from tests.deploy.support import ROOT, tool
from tests.gateway.cluster.test_three_nodes import _call
from tests.gateway.e2e import connect, data, start_gateway, wait_for
from tests.pg import SUPERUSER, PostgresServer

MANIFESTS = sorted((ROOT / "deploy" / "kubernetes" / "postgres").glob("*.yaml"))
NODES = ROOT / "deploy" / "kubernetes" / "cluster" / "almanac-nodes.yaml"
SCALING = ROOT / "deploy" / "SCALING.md"
#: The node's placement_lease in the drill (seconds).
LEASE_S = 10


def documents(path: Path) -> dict[str, dict[str, Any]]:
    return {
        f"{d['kind']}/{d['metadata']['name']}": d
        for d in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    }


def postgres_docs() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in MANIFESTS:
        found.update(documents(path))
    return found


def backup_job() -> dict[str, Any]:
    job = postgres_docs()["CronJob/almanac-postgres-backup"]
    (container,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return dict(container)


def restore_steps() -> str:
    text = SCALING.read_text(encoding="utf-8")
    block = text[text.index("<!-- restore-drill:start -->") : text.index("<!-- restore-drill:end -->")]
    found = re.search(r"```sh\n(.*?)```", block, re.DOTALL)
    assert found, "deploy/SCALING.md has no restore steps between the restore-drill markers"
    return found.group(1)


@pytest.mark.req("run:scale-out")
def test_the_postgresql_sample_passes_kubernetes_validate(tmp_path: Path) -> None:
    assert MANIFESTS
    result = tool("kubernetes-validate", "--strict", "--quiet", *map(str, MANIFESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        MANIFESTS[0].read_text(encoding="utf-8").replace("concurrencyPolicy: Forbid", "concurrencyPolicy: 3")
    )
    assert tool("kubernetes-validate", "--strict", "--quiet", str(bad)).returncode != 0


@pytest.mark.req("run:scale-out")
def test_the_sample_is_reachable_by_the_nodes_and_the_backup_job_only() -> None:
    docs = postgres_docs()
    sts = docs["StatefulSet/almanac-postgres"]
    service = docs[f"Service/{sts['spec']['serviceName']}"]
    namespace = sts["metadata"]["namespace"]
    address = f"{service['metadata']['name']}.{namespace}.svc.cluster.local"
    # the address the manifest tells the operator to put in the nodes' database-url, and the job's
    text = MANIFESTS[0].read_text(encoding="utf-8")
    assert f"@{address}:5432/almanac" in text
    env = {e["name"]: e for e in backup_job()["env"]}
    assert env["PGHOST"]["value"] == address
    # passwords from the Secret, never in the manifest
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    for var in [*container["env"], *env.values()]:
        assert "PASSWORD" not in var["name"] or "secretKeyRef" in var["valueFrom"], var["name"]
    # the database on a persistent volume, the dumps on another
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    pgdata = {e["name"]: e.get("value") for e in container["env"]}["PGDATA"]
    assert pgdata.startswith(mounts[claim["metadata"]["name"]] + "/")
    assert "PersistentVolumeClaim/almanac-postgres-backups" in docs
    # only the nodes and the backup job reach it, on 5432 — and the nodes may reach 5432
    policy = docs["NetworkPolicy/almanac-postgres"]
    assert (
        policy["spec"]["podSelector"]["matchLabels"].items()
        <= sts["spec"]["template"]["metadata"]["labels"].items()
    )
    (rule,) = policy["spec"]["ingress"]
    allowed = [p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for p in rule["from"]]
    job_labels = docs["CronJob/almanac-postgres-backup"]["spec"]["jobTemplate"]["spec"]["template"][
        "metadata"
    ]
    node_labels = documents(NODES)["StatefulSet/almanac-node"]["spec"]["template"]["metadata"]["labels"]
    assert sorted(allowed) == sorted(
        [node_labels["app.kubernetes.io/name"], job_labels["labels"]["app.kubernetes.io/name"]]
    )
    assert [p["port"] for p in rule["ports"]] == [5432]
    egress = documents(NODES)["NetworkPolicy/almanac-node"]["spec"]["egress"]
    assert any(p["port"] == 5432 for rule in egress for p in rule.get("ports", []))


def _libpq_env(server: PostgresServer, url: str, backups: Path) -> dict[str, str]:
    """What the backup job's pod has (PGHOST, PGUSER, PGDATABASE, BACKUP_DIR), for the test's server;
    its PostgreSQL client programs first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "ALMANAC_"))}
    env.update(
        PATH=f"{server.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        PGHOST=str(server.socket_dir),
        PGUSER=SUPERUSER,
        PGDATABASE=unquote(urlsplit(url).path.lstrip("/")),
        BACKUP_DIR=str(backups),
    )
    return env


def _sh(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-ec", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.req("run:scale-out")
async def test_the_restore_drill_brings_back_tokens_and_memories(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.create_database()
    backups = tmp_path / "backups"
    backups.mkdir()
    env = _libpq_env(postgres, url, backups)
    node = {
        "database_url": url,
        "engine_warm_spare": "false",
        "node": "node-a",
        "advertise_url": "http://node-a.internal:8080",
        "cluster_secret": "c" * 40,
        "node_heartbeat_interval": "1",
        "placement_lease": str(LEASE_S),
    }
    gateway = start_gateway(tmp_path / "data", tmp_path / "before.log", **node)
    try:
        gateway.owner("ada@example.com")
        token = gateway.token("ada@example.com", "laptop")
        async with connect(gateway, token) as client:
            data(await client.call_tool("remember", {"statement": "the fjord deploy uses blue-green"}))
        # the sample's nightly backup, as its CronJob runs it: a failed dump leaves no backup behind
        (script,) = backup_job()["command"][2:]
        failed = _sh(script, {**env, "PGDATABASE": "no_such_database"})
        assert failed.returncode != 0 and not list(backups.glob("control-plane-*.dump"))
        day = 24 * 3600
        for name, age in (("control-plane-old.dump", 15 * day), ("control-plane-recent.dump", 13 * day)):
            (backups / name).write_bytes(b"an earlier dump")
            os.utime(backups / name, (time.time() - age, time.time() - age))
        dumped = _sh(script, env)
        assert dumped.returncode == 0, dumped.stderr
    finally:
        gateway.stop()
    # the new dump beside the one 13 days old; the one 15 days old removed
    kept = sorted(p.name for p in backups.glob("control-plane-*.dump"))
    assert len(kept) == 2 and "control-plane-recent.dump" in kept, kept

    # a drill first, the real database untouched: restored under another name, and one gateway on a
    # copy of the node's data directory pointed at it
    drill = f"almanac_drill_{secrets.token_hex(4)}"
    assert _sh(restore_steps(), {**env, "PGDATABASE": drill}).returncode == 0
    shutil.copytree(tmp_path / "data", tmp_path / "drill-data")
    drill_url = url.replace(f"/{env['PGDATABASE']}?", f"/{drill}?")
    await _serves_the_old_token_and_memory(
        tmp_path / "drill-data", tmp_path / "drill.log", token, {**node, "database_url": drill_url}
    )

    # the disaster: the database is gone
    with psycopg.connect(postgres.url(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{env["PGDATABASE"]}"'.encode())

    restored = _sh(restore_steps(), env)
    assert restored.returncode == 0, restored.stderr
    # the steps refuse to restore over a database that exists (they would not mix two control planes)
    again = _sh(restore_steps(), env)
    assert again.returncode != 0 and "already exists" in again.stderr
    await _serves_the_old_token_and_memory(tmp_path / "data", tmp_path / "after.log", token, node)


async def _serves_the_old_token_and_memory(
    data_dir: Path, log: Path, token: str, node: dict[str, str]
) -> None:
    """Start the node on ``data_dir``: once the leases the dump recorded have run out (the node cannot
    know their holder stopped; meanwhile its workspace is refused as a down node's, never served
    twice), it accepts ``token`` minted before the backup, serves the memory, takes a new write."""
    served = start_gateway(data_dir, log, **node)
    try:
        refusals: list[httpx.Response] = []

        def serving() -> bool:
            answer = _call(served, token)
            if answer.status_code != 200:
                refusals.append(answer)
            return answer.status_code == 200

        wait_for(serving, timeout=LEASE_S + 60, what="the restored node to serve its workspace")
        for answer in refusals:
            assert answer.status_code == 503 and "retry-after" in answer.headers, answer.text
            assert answer.json()["error"]["code"] == "node_unavailable"
        async with connect(served, token) as client:
            found = await client.call_tool("get_context", {"query": "fjord deploy"})
            assert "blue-green" in str(found.content)
            data(await client.call_tool("remember", {"statement": "written after the restore"}))
    finally:
        served.stop()
