"""Moves that keep serving (``run:scale-out``; deploy/SCALING.md "Moving a workspace"): a real
PostgreSQL, two real ``almanac serve`` nodes and the real ``almanac workspace move`` command.

A workspace of more than a thousand files is copied while its node serves it, then refused for a
final sync of what changed only — measured from outside (a client calling as fast as it is
answered) and from the move's record, and printed — while writers through both nodes lose nothing
and duplicate nothing. Every way a move can fail before the switch — the command interrupted, a
file that arrives otherwise than listed, the target killed, the source killed — leaves no staging
folder behind and the workspace on its source, never split."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from gateway.control.clock import epoch
from gateway.control.store import ControlPlane
from tests.gateway.cluster.nodes import SECRET, Cluster, running
from tests.gateway.cluster.test_three_nodes import ACCEPT, INITIALIZE
from tests.gateway.cluster.test_three_nodes import _call as initialize
from tests.gateway.e2e import ALMANAC, Gateway, clean_env, connect, data, wait_for
from tests.pg import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

#: The files a seeded workspace holds besides what its engine writes.
SEEDED = 1074


class _Steady(Cluster):
    """Leases that a loaded machine does not miss: a refusal seen here is the move's, nothing else."""

    def settings(self, name: str) -> dict[str, str]:
        return {**super().settings(name), "node_heartbeat_interval": "1", "placement_lease": "30"}


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Steady]:
    with running(
        _Steady(postgres.create_database(), tmp_path_factory.mktemp("live"), {}), ["node-a", "node-b"]
    ) as found:
        yield found


@pytest.fixture(scope="module")
def settled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace folder of :data:`SEEDED` notes with its index built (``almanac engine`` with
    ``--reindex``): a workspace in use for a while, not one whose engine still indexes a backlog."""
    folder = tmp_path_factory.mktemp("settled") / "workspace"
    seed = folder / "notes" / "Imported" / "seed"
    seed.mkdir(parents=True)
    for i in range(SEEDED):
        (seed / f"page-{i:04d}.md").write_text(f"# Page {i}\n\nSeeded page {i}: {'pebble drift ' * 12}\n")
    subprocess.run(
        [sys.executable, "-m", "engine", "--dir", str(folder), "--reindex"],
        check=True,
        capture_output=True,
        timeout=600,
        env=clean_env({}),
    )
    return folder


def _seeded_on_a(cluster: Cluster, email: str, settled: Path) -> tuple[str, str]:
    """A new owner whose workspace is placed on node-a and is a copy of ``settled``; (its id, a
    token)."""
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        owner, workspace = store.owners.create(email, None)
        store.nodes.place_on(workspace.id, "node-a", now=time.time(), lease=30.0)
        token = store.connections.create_pat(owner.id, workspace.id, "agent")[1]
    finally:
        store.close()
    shutil.copytree(settled, _folder(cluster.nodes["node-a"], workspace.id))
    return workspace.id, token


def _folder(node: Gateway, workspace: str) -> Path:
    return node.data_dir / "workspaces" / workspace


def _staging(node: Gateway, workspace: str) -> Path:
    return node.data_dir / "workspaces" / f".incoming-{workspace}"


def _count(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _env(node: Gateway) -> dict[str, str]:
    return clean_env({**node.cli_env, "ALMANAC_CLUSTER_SECRET": SECRET, "ALMANAC_PLACEMENT_LEASE": "30"})


def _move(node: Gateway, email: str, *args: str) -> list[str]:
    return [
        ALMANAC,
        "workspace",
        "move",
        "default",
        "--owner",
        email,
        *args,
        "--data-dir",
        str(node.data_dir),
    ]


def _run_move(node: Gateway, email: str, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _move(node, email, "--to", target), capture_output=True, text=True, timeout=600, env=_env(node)
    )


def _start_move(node: Gateway, email: str, target: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _move(node, email, "--to", target),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(node), **extra},
    )


def _occurrences(folder: Path, needle: str) -> int:
    """How many times ``needle`` is written in the workspace's Markdown (its store, not its index)."""
    return sum(p.read_bytes().count(needle.encode()) for p in folder.rglob("*.md") if p.is_file())


#: The id each acknowledged statement was given, to read it back by id (a search would depend on
#: its ranking among the seeded notes, which is not what these tests are about).
_IDS: dict[str, str] = {}


async def _write(node: Gateway, token: str, statements: list[str]) -> None:
    async with connect(node, token) as client:
        for statement in statements:
            _IDS[statement] = data(await client.call_tool("remember", {"statement": statement}))["id"]


async def _all_served(node: Gateway, token: str, statements: list[str]) -> None:
    async with connect(node, token) as client:
        for statement in statements:
            found = await client.call_tool("retrieve_memory", {"id": _IDS[statement]})
            assert statement in str(data(found)), statement


@dataclass(frozen=True)
class _Probe:
    sent: float  # monotonic
    status: int
    code: str
    retry_after: str | None


@pytest.mark.req("run:scale-out")
async def test_a_move_of_1000_files_refuses_calls_only_for_its_final_sync_and_keeps_every_write_once(
    cluster: _Steady, settled: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _seeded_on_a(cluster, "ada@example.com", settled)
    await _write(b, token, ["the baseline entry 00000 stands"])  # starts its engine on node-a
    once = _occurrences(_folder(a, workspace), "the baseline entry 00000 stands")
    assert once >= 1
    acknowledged: list[str] = []
    probes: list[_Probe] = []
    moved = anyio.Event()

    async def writer(edge: Gateway, tag: str) -> None:
        i = 0
        while not (moved.is_set() and i > 3):
            try:
                async with connect(edge, token) as client:
                    while not (moved.is_set() and i > 3):
                        statement = f"the {tag} entry {i:05d} stands"
                        receipt = data(await client.call_tool("remember", {"statement": statement}))
                        _IDS[statement] = receipt["id"]
                        acknowledged.append(statement)
                        i += 1
                        await anyio.sleep(0.1)  # an agent's pace, not a benchmark's
            except Exception:  # refused by the final sync (503), or its session moved away: again
                await anyio.sleep(0.05)

    async def prober() -> None:
        """Calls through node-b as fast as it answers: when refusals begin and end."""
        headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
        async with httpx.AsyncClient(timeout=60) as http:
            while not moved.is_set():
                sent = time.monotonic()
                r = await http.post(b.mcp_url, json=INITIALIZE, headers=headers)
                code = r.json()["error"]["code"] if r.status_code != 200 else ""
                probes.append(_Probe(sent, r.status_code, code, r.headers.get("retry-after")))
                await anyio.sleep(0.05)

    began = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer, a, "source-side")
        tg.start_soon(writer, b, "edge-side")
        tg.start_soon(prober)
        await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: len(acknowledged) >= 6, timeout=120, what="writes before the move")
        )
        done = await anyio.to_thread.run_sync(lambda: _run_move(a, "ada@example.com", "node-b"))
        moved.set()
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert cluster.node_of(workspace) == "node-b"

    # the refusal, from the move's own record …
    (row,) = cluster.rows("SELECT sync_began_at, sync_ended_at FROM moves WHERE workspace_id = %s", workspace)
    recorded = epoch(str(row[1])) - epoch(str(row[0]))
    # … and from outside: from the first refused call to the first call served after it
    refused = [p for p in probes if p.status == 503]
    assert refused, "no call was refused: the final sync was not seen"
    assert {p.code for p in refused} == {"workspace_moving"}, refused
    first = min(p.sent for p in refused)
    served_after = [p.sent for p in probes if p.status == 200 and p.sent > first]
    assert served_after, probes[-5:]
    seen = min(served_after) - first
    assert max(p.sent for p in refused) < min(served_after)  # one window, no refusal after it
    announced = int(next(line for line in done.stderr.splitlines() if "Retry-After" in line).split()[-2])
    assert all(1 <= int(p.retry_after or 0) <= announced for p in refused), (announced, refused)
    print(
        f"\nmove of {_count(_folder(b, workspace))} files took {took:.1f} s in all; calls were refused for "
        f"{recorded:.3f} s by the record, {seen:.3f} s seen from outside ({len(refused)} refused probes, "
        f"Retry-After {announced}); {len(acknowledged)} writes acknowledged\n{done.stderr}"
    )
    # Under a second on the 2-core development machine otherwise idle; 1.5-2.5 s when six test
    # runs share it (stopping the source's engine alone then takes up to 1.5 s). Asserted: the bound
    # a loaded machine keeps — a few seconds at most, out of a move served throughout the rest.
    assert recorded < 4.0, recorded
    assert seen < 4.0, seen
    assert seen < took / 8
    assert "calls refused for" in done.stderr

    # every acknowledged write is on node-b exactly once; node-a keeps nothing, no staging is left
    target = _folder(b, workspace)
    assert _count(target) > SEEDED
    counts = {s: _occurrences(target, s) for s in acknowledged}
    assert {s: n for s, n in counts.items() if n != once} == {}
    assert not _folder(a, workspace).exists()
    assert not _staging(b, workspace).exists()
    await _all_served(a, token, acknowledged[:3] + acknowledged[-3:])
    status = subprocess.run(
        _move(a, "ada@example.com", "--status"), capture_output=True, text=True, timeout=60, env=_env(a)
    )
    assert "by its final sync" in status.stdout, status.stdout


def _pulling(node: Gateway, workspace: str, proc: subprocess.Popen[str]) -> None:
    """Wait until the target's staging folder holds a good part of the copy, the command running."""
    wait_for(
        lambda: _count(_staging(node, workspace)) >= 100 or proc.poll() is not None,
        timeout=120,
        what="the target to be copying",
    )
    assert proc.poll() is None, proc.communicate()


def _still_on_a(cluster: Cluster, workspace: str) -> None:
    assert cluster.node_of(workspace) == "node-a"
    (row,) = cluster.rows("SELECT moving_to FROM placements WHERE workspace_id = %s", workspace)
    assert row[0] is None


@pytest.mark.req("run:scale-out")
async def test_an_interrupted_move_removes_the_target_s_staging_and_the_source_serves_on(
    cluster: _Steady, settled: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _seeded_on_a(cluster, "bea@example.com", settled)
    written = ["the quarry entry 00001 stands"]
    await _write(b, token, written)
    proc = _start_move(a, "bea@example.com", "node-b")
    _pulling(b, workspace, proc)
    proc.send_signal(signal.SIGINT)  # the operator's Ctrl-C, half-way through the copy
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, err
    _still_on_a(cluster, workspace)
    wait_for(lambda: not _staging(b, workspace).exists(), timeout=30, what="node-b to drop its staging")
    assert not _folder(b, workspace).exists()
    (state,) = cluster.rows("SELECT state FROM moves WHERE workspace_id = %s", workspace)
    assert state[0] == "discarded"
    await _write(b, token, ["the quarry entry 00002 stands"])  # served on by node-a
    await _all_served(b, token, [*written, "the quarry entry 00002 stands"])
    for statement in [*written, "the quarry entry 00002 stands"]:
        assert _occurrences(_folder(a, workspace), statement) == 1, statement  # in node-a's store, once


@pytest.mark.req("run:scale-out")
async def test_a_copy_that_differs_from_its_source_s_list_calls_the_move_off_leaving_nothing(
    cluster: _Steady, settled: Path, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _seeded_on_a(cluster, "cai@example.com", settled)
    written = ["the meadow entry 00001 stands"]
    await _write(b, token, written)
    gate = tmp_path / "gate"
    proc = _start_move(a, "cai@example.com", "node-b", ALMANAC_TEST_MOVE_PAUSE=f"released:{gate}")
    wait_for(
        lambda: Path(f"{gate}.reached").exists() or proc.poll() is not None,
        timeout=120,
        what="the move to release the workspace",
    )
    assert proc.poll() is None, proc.communicate()
    # the target's copy of a file goes bad (the same size, other bytes) before the final check
    page = _staging(b, workspace) / "notes" / "Imported" / "seed" / "page-0007.md"
    page.write_bytes(page.read_bytes().replace(b"Page 7", b"Page ?"))
    gate.write_text("go")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "the copy differs from the original: differs: notes/Imported/seed/page-0007.md" in err, err
    _still_on_a(cluster, workspace)
    assert not _staging(b, workspace).exists()
    assert not _folder(b, workspace).exists()
    await _all_served(b, token, written)


@pytest.mark.req("run:scale-out")
async def test_a_target_killed_mid_copy_leaves_no_staging_once_it_is_back(
    cluster: _Steady, settled: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _seeded_on_a(cluster, "dov@example.com", settled)
    written = ["the orchard entry 00001 stands"]
    await _write(a, token, written)
    proc = _start_move(a, "dov@example.com", "node-b")
    _pulling(b, workspace, proc)
    cluster.kill("node-b")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert "node 'node-b'" in err, err
    _still_on_a(cluster, workspace)
    assert _staging(b, workspace).exists()  # node-b died with it
    await _all_served(a, token, written)  # served by its source meanwhile
    back = cluster.start("node-b")
    wait_for(lambda: not _staging(back, workspace).exists(), timeout=60, what="node-b to remove the leftover")
    assert not _folder(back, workspace).exists()
    wait_for(
        lambda: (
            cluster.rows("SELECT state FROM moves WHERE workspace_id = %s", workspace)[0][0] == "discarded"
        ),
        timeout=60,
        what="the move to be recorded as discarded",
    )


@pytest.mark.req("run:scale-out")
async def test_a_source_killed_mid_copy_is_named_and_its_workspace_waits_for_it(
    cluster: _Steady, settled: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _seeded_on_a(cluster, "eve@example.com", settled)
    written = ["the lantern entry 00001 stands"]
    await _write(b, token, written)
    proc = _start_move(a, "eve@example.com", "node-b")
    _pulling(b, workspace, proc)
    cluster.kill("node-a")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert "node 'node-a', the move's source" in err and "stopped answering" in err, err
    assert "run the move again" in err and "HTTP 500" not in err, err
    _still_on_a(cluster, workspace)
    wait_for(lambda: not _staging(b, workspace).exists(), timeout=30, what="node-b to drop its staging")
    assert not _folder(b, workspace).exists()
    refused = initialize(b, token)  # never split: refused while its node is down, opened nowhere else
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "node_unavailable"
    assert refused.headers["retry-after"]
    back = cluster.start("node-a", a.data_dir)
    wait_for(  # once the leases its killed process held have run out
        lambda: initialize(b, token).status_code == 200, timeout=120, what="node-a to serve it again"
    )
    await _all_served(b, token, written)
    assert _count(_folder(back, workspace)) > SEEDED
    assert not _folder(b, workspace).exists()
    assert os.listdir(b.data_dir / "workspaces").count(f".incoming-{workspace}") == 0
