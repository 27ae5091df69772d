"""Putting a cluster right after things went wrong (``run:scale-out``): a real PostgreSQL
control plane, three real ``almanac serve`` nodes and the real ``almanac`` commands as subprocesses.

Every move counts, not only a workspace's last: a workspace moved A → B by a command killed after the
switch (the old copy kept on A), then B → C, still has A's copy listed by ``almanac node stale``,
deleted by ``almanac workspace move --finish`` (every write kept), and erased with the account.

A node lost for good (``almanac node lost NAME --confirm``; refused while it heartbeats): its
workspaces answer 410 ``workspace_lost`` everywhere and are opened nowhere else; one is restored from
a backup folder on another node (``almanac workspace restore``, checked file by file) and served
there; an account erase does not wait for the lost node; the node, back with its old disk, deletes
the erased account's folder, serves nothing until declared found again, and never a workspace
restored elsewhere meanwhile."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest

from gateway.auth.passwords import hash_password
from gateway.cluster import signing
from gateway.cluster.move.driver import NodeCalls
from gateway.control.clock import epoch
from gateway.control.store import ControlPlane
from gateway.errors import MoveFailed
from tests.gateway.cluster.nodes import SECRET, Cluster, started_nodes
from tests.gateway.cluster.test_interrupted_moves import (
    _all_served,
    _almanac,
    _at,
    _env,
    _erase_on,
    _killed_at,
    _owner_on_a,
    _run,
    _write,
)
from tests.gateway.cluster.test_three_nodes import _call
from tests.gateway.e2e import ALMANAC, Gateway, files_containing, wait_for
from tests.gateway.web.test_pages import PASSWORD

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


cluster = started_nodes("cluster", "recovery", ("node-a", "node-b", "node-c"), Cluster)


def _stale(cluster: Cluster, workspace: str) -> list[str]:
    """``almanac node stale``'s lines about ``workspace``."""
    listed = _almanac(cluster.nodes["node-b"], "node", "stale")
    assert listed.returncode == 0, listed.stderr
    return [line for line in listed.stdout.splitlines() if workspace in line]


def _switched_then_killed(node: Gateway, email: str, target: str, tmp: Path) -> None:
    tmp.mkdir()
    _killed_at(node, email, target, "flipped", tmp, lambda: None)


def _folder(cluster: Cluster, node: str, workspace: str) -> Path:
    return cluster.nodes[node].data_dir / "workspaces" / workspace


@pytest.mark.req("run:scale-out")
async def test_an_old_copy_an_earlier_move_left_is_listed_and_finished_after_a_later_move(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b, c = (cluster.nodes[n] for n in ("node-a", "node-b", "node-c"))
    workspace, token = _owner_on_a(cluster, "fay@example.com")
    before = [f"fay charts the {w} before any move" for w in ("estuary", "headland", "shoal")]
    await _write(b, token, before)
    # A -> B, the command killed right after the switch: node-a keeps its old copy
    await anyio.to_thread.run_sync(
        lambda: _killed_at(a, "fay@example.com", "node-b", "flipped", tmp_path, lambda: None)
    )
    wait_for(lambda: _call(c, token).status_code == 200, timeout=30, what="node-b to serve it")
    between = [f"fay charts the {w} between the moves" for w in ("skerry", "sound")]
    await _write(c, token, between)
    # B -> C, complete: node-b's copy goes, node-a's (the earlier move's) stays
    moved = _run(c, "fay@example.com", "--to", "node-c")
    assert moved.returncode == 0, moved.stderr
    assert cluster.node_of(workspace) == "node-c" and not _folder(cluster, "node-b", workspace).exists()
    assert all(files_containing(_folder(cluster, "node-a", workspace), s) for s in before)
    (line,) = _stale(cluster, workspace)  # listed although the workspace's last move is complete
    assert line.startswith(f"node-a\t{workspace}\t") and "--finish" in line, line
    status = _run(a, "fay@example.com", "--status")
    assert "node-a -> node-b\tflipped" in status.stdout and "node-b -> node-c\tcleaned" in status.stdout
    after = [f"fay charts the {w} after the moves" for w in ("tideway", "roadstead")]
    await _write(a, token, after)
    finished = _run(b, "fay@example.com", "--finish")
    assert finished.returncode == 0, finished.stderr
    assert "to node-b: the old copy on node-a is deleted" in finished.stderr, finished.stderr
    assert not _folder(cluster, "node-a", workspace).exists()
    assert _stale(cluster, workspace) == []
    for statement in before + between + after:
        assert files_containing(_folder(cluster, "node-c", workspace), statement), statement
    await _all_served(b, token, before + between + after)
    again = _run(b, "fay@example.com", "--finish")
    assert again.returncode == 1 and "already deleted" in again.stderr, again.stderr


@pytest.mark.req("run:scale-out")
@pytest.mark.req("life:delete")
async def test_erasing_the_account_erases_the_old_copies_of_every_move(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, c = cluster.nodes["node-a"], cluster.nodes["node-c"]
    workspace, token = _owner_on_a(cluster, "gus@example.com")
    await _write(a, token, ["gus's private log of soundings"])
    # A -> B and then B -> C, both killed after the switch: old copies on node-a and node-b
    for target in ("node-b", "node-c"):
        await anyio.to_thread.run_sync(_switched_then_killed, a, "gus@example.com", target, tmp_path / target)
    assert cluster.node_of(workspace) == "node-c"
    for node in ("node-a", "node-b", "node-c"):
        assert files_containing(_folder(cluster, node, workspace), "log of soundings"), node
    assert sorted(line.split("\t")[0] for line in _stale(cluster, workspace)) == ["node-a", "node-b"]
    erased = await anyio.to_thread.run_sync(lambda: _erase_on(a, "gus@example.com"))
    assert erased.status_code == 303 and erased.headers["location"] == "/login?erased=1", erased.text
    for gateway in cluster.nodes.values():
        assert not (gateway.data_dir / "workspaces" / workspace).exists(), gateway.data_dir
    assert not cluster.rows("SELECT id FROM owners WHERE email = %s", "gus@example.com")
    assert _stale(cluster, workspace) == []
    assert c.proc.poll() is None


def _heard_from(cluster: Cluster, node: str) -> float:
    (row,) = cluster.rows("SELECT heartbeat_at FROM nodes WHERE name = %s", node)
    return epoch(str(row[0]))


def _owner_on(cluster: Cluster, email: str, node: str) -> tuple[str, str, str]:
    """A new owner whose workspace is placed on ``node``: (owner id, workspace id, token)."""
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        owner, workspace = store.owners.create(email, hash_password(PASSWORD))
        store.nodes.place_on(workspace.id, node, now=time.time(), lease=2.0)
        return owner.id, workspace.id, store.connections.create_pat(owner.id, workspace.id, "agent")[1]
    finally:
        store.close()


def _restore_checked_midway(
    cluster: Cluster, workspace: str, token: str, backup: Path, tmp: Path
) -> subprocess.CompletedProcess[str]:
    """``almanac workspace restore`` of ``backup`` to node-a, paused once every file is sent (before
    the target checks and settles them) to see that meanwhile the workspace is refused as moving,
    a second restore is refused, an unsigned file is refused, and a copy that differs from the
    backup is not settled; then let it finish."""
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    gate = tmp / "gate-restore"
    args = ["workspace", "restore", "default", "--owner", "hal@example.com", "--from", str(backup)]
    proc = subprocess.Popen(
        [ALMANAC, *args, "--to", "node-a", *_at(a)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(a, ALMANAC_TEST_MOVE_PAUSE=f"sent:{gate}"),
    )
    try:
        wait_for(lambda: Path(f"{gate}.reached").exists() or proc.poll() is not None, timeout=60, what="sent")
        assert proc.poll() is None, proc.communicate()
        for edge in (a, b):
            moving = _call(edge, token)
            assert moving.status_code == 503 and moving.json()["error"]["code"] == "workspace_restoring"
        second = _almanac(a, *args, "--to", "node-b")
        assert second.returncode == 1 and "another restore" in second.stderr, second.stderr
        path = f"/internal/v1/workspaces/{workspace}/restore/files/notes/forged.md"
        assert httpx.put(a.url + path, content=b"forged", timeout=30).status_code == 401
        store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
        try:
            (node_a,) = [n for n in store.nodes.all() if n.name == "node-a"]
        finally:
            store.close()
        # a file whose bytes are not those its signed SHA-256 declares is not kept
        declared = "0" * 64
        signed = signing.sign(
            SECRET, method="PUT", path=path, principal=None, workspace_id=workspace, target="node-a",
            body=b"", now=time.time(), digest=declared,
        )  # fmt: skip
        damaged = httpx.put(
            a.url + path,
            content=b"forged",
            timeout=30,
            headers={
                signing.PRINCIPAL_HEADER.decode(): signed.principal,
                signing.SIGNATURE_HEADER.decode(): signed.signature,
                signing.CONTENT_DIGEST_HEADER.decode(): declared,
            },
        )
        assert damaged.status_code == 400 and "arrived damaged" in damaged.text, damaged.text
        wrong = [{"path": "notes/forged.md", "size": 6, "sha256": "0" * 64}]
        calls = NodeCalls(SECRET, time.time)
        try:
            with pytest.raises(MoveFailed, match=r"differs from the backup.*\(bad_request, HTTP 400\)"):
                calls.call(node_a, "POST", workspace, "restore/settle", wrong)
        finally:
            calls.close()
        assert not _folder(cluster, "node-a", workspace).exists()
        gate.write_text("go")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _lost(response: httpx.Response) -> bool:
    if response.status_code != 410:
        return False
    error = response.json()["error"]
    return error["code"] == "workspace_lost" and "declared lost" in error["message"]


@pytest.mark.req("run:scale-out")
@pytest.mark.req("life:delete")
async def test_a_lost_node_s_workspaces_are_refused_until_restored_from_a_backup_and_never_served_by_it_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    _, hal, hal_token = _owner_on(cluster, "hal@example.com", "node-c")
    _, ivy, ivy_token = _owner_on(cluster, "ivy@example.com", "node-c")
    jo_id, jo, jo_token = _owner_on(cluster, "jo@example.com", "node-c")
    _, kae, kae_token = _owner_on(cluster, "kae@example.com", "node-c")
    backed_up = [f"hal logs the {w} before the backup" for w in ("bellbuoy", "fogbank", "lighthouse")]
    await _write(a, hal_token, backed_up)
    await _write(b, ivy_token, ["ivy keeps the harbour book"])
    await _write(b, jo_token, ["jo's private diary"])
    await _write(b, kae_token, ["kae's private letters"])
    # the backup: a copy of hal's folder on node-c (the Markdown store; the index is rebuilt)
    backup = tmp_path / "backup" / hal
    shutil.copytree(
        _folder(cluster, "node-c", hal), backup, ignore=shutil.ignore_patterns(".index", ".cache", "*.lock")
    )
    # a file of the owner's whose name was once the receiver's temporary file: restored like any other
    (backup / ".almanac-receiving").write_text("kept as it is\n")
    await _write(a, hal_token, ["hal logs the squall after the backup"])  # on node-c's disk only
    # node-c is running: declaring it lost is refused
    early = _almanac(b, "node", "lost", "node-c", "--confirm")
    assert early.returncode == 1 and "heartbeated" in early.stderr, early.stderr
    cluster.kill("node-c")  # its disk is "gone": nobody reads node-c's data directory from here on
    wait_for(lambda: time.time() - _heard_from(cluster, "node-c") > 2.5, timeout=30, what="node-c silent")
    # kae's account erased while node-c is only down: unfinished, it waits for node-c
    partly = await anyio.to_thread.run_sync(lambda: _erase_on(b, "kae@example.com"))
    assert partly.status_code == 303 and partly.headers["location"] == "/login?erased=partly"
    on_c = len(cluster.rows("SELECT workspace_id FROM placements WHERE node = %s", "node-c"))
    assert on_c >= 4  # hal's, ivy's, jo's, kae's (and any an earlier test left there)
    declared = _almanac(b, "node", "lost", "node-c", "--confirm")
    assert declared.returncode == 0 and f"its {on_c} workspace(s)" in declared.stderr, declared.stderr
    # refused everywhere with the situation named, no Retry-After, nothing opened elsewhere
    for edge in (a, b):
        for token in (hal_token, ivy_token):
            refused = _call(edge, token)
            assert _lost(refused) and "retry-after" not in refused.headers, refused.text
            assert "almanac workspace restore" in refused.json()["error"]["message"]
    for node in ("node-a", "node-b"):
        assert not _folder(cluster, node, hal).exists() and not _folder(cluster, node, ivy).exists()
    moved = _run(a, "hal@example.com", "--to", "node-a")
    assert moved.returncode == 1 and "declared lost" in moved.stderr and "restore" in moved.stderr
    # erasing jo's account does not wait for node-c: there is nothing left to erase there
    erased = await anyio.to_thread.run_sync(lambda: _erase_on(b, "jo@example.com"))
    assert erased.status_code == 303 and erased.headers["location"] == "/login?erased=1", erased.text
    assert not cluster.rows("SELECT id FROM owners WHERE email = %s", "jo@example.com")
    kinds = [str(k) for (k,) in cluster.rows("SELECT kind FROM audit_events WHERE owner_id = %s", jo_id)]
    assert "account.erase.lost_copy" in kinds and "account.erase" in kinds
    # and kae's unfinished erase is finished by the command line, not waiting for node-c either
    finished_erase = _almanac(b, "owner", "erase", "kae@example.com", "--finish")
    assert finished_erase.returncode == 0 and "erased the account" in finished_erase.stderr, (
        finished_erase.stderr
    )
    assert not cluster.rows("SELECT id FROM owners WHERE email = %s", "kae@example.com")
    # hal restored from the backup on node-a: checked file by file, then served
    bad = _almanac(a, "workspace", "restore", "default", "--owner", "hal@example.com", "--from",
                   str(tmp_path / "nothing-here"), "--to", "node-a")  # fmt: skip
    assert bad.returncode == 1 and "neither a folder nor a file" in bad.stderr and _lost(_call(a, hal_token))
    restored = await anyio.to_thread.run_sync(
        _restore_checked_midway, cluster, hal, hal_token, backup, tmp_path
    )
    assert restored.returncode == 0, restored.stderr
    assert cluster.node_of(hal) == "node-a"
    await _all_served(b, hal_token, backed_up)
    assert not files_containing(_folder(cluster, "node-a", hal), "after the backup")  # not in the backup
    for path in backup.rglob("*"):
        if path.is_file():
            copy = _folder(cluster, "node-a", hal) / path.relative_to(backup)
            assert copy.read_bytes() == path.read_bytes(), path
    status = _run(a, "hal@example.com", "--status")
    assert "node-c -> node-a\tserved" in status.stdout and "restored from the backup" in status.stdout
    kinds = [str(k) for (k,) in cluster.rows("SELECT kind FROM audit_events WHERE workspace_id = %s", hal)]
    assert "workspace.restore" in kinds
    (line,) = _stale(cluster, hal)
    assert line.startswith(f"node-c\t{hal}\t") and "declared lost" in line, line
    assert _lost(_call(b, ivy_token))  # not restored: still lost
    # node-c comes back with its old disk: still lost, it serves nothing of its own …
    assert files_containing(_folder(cluster, "node-c", jo), "private diary")  # on the disk all along
    assert files_containing(_folder(cluster, "node-c", kae), "private letters")
    c = await anyio.to_thread.run_sync(cluster.start, "node-c")
    # … deletes the folder of the account erased meanwhile …
    gone = (_folder(cluster, "node-c", jo), _folder(cluster, "node-c", kae))
    wait_for(lambda: not any(f.exists() for f in gone), timeout=30, what="the erased accounts' folders to go")
    assert not cluster.rows("SELECT node FROM erased_copies WHERE workspace_id IN (%s, %s)", jo, kae)
    for edge in (a, b, c):
        assert _lost(_call(edge, ivy_token))
    # … and not hal, restored elsewhere since: its call through node-c is served by node-a
    assert _call(c, hal_token).status_code == 200
    await _all_served(c, hal_token, backed_up)
    assert not any(p.name == hal for p in c.engines())
    assert files_containing(_folder(cluster, "node-c", hal), "after the backup")  # its old copy, untouched
    # declared found again (its disk is back): it serves ivy again, with her writes; hal stays on node-a
    found = _almanac(a, "node", "lost", "node-c", "--undo", "--confirm")
    assert found.returncode == 0, found.stderr
    wait_for(lambda: _call(a, ivy_token).status_code == 200, timeout=30, what="node-c to serve ivy again")
    await _all_served(a, ivy_token, ["ivy keeps the harbour book"])
    assert cluster.node_of(hal) == "node-a" and not any(p.name == hal for p in c.engines())
    # and the restore's old copy on node-c goes with --finish, like a move's
    finished = _run(a, "hal@example.com", "--finish")
    assert finished.returncode == 0, finished.stderr
    assert not _folder(cluster, "node-c", hal).exists()
    await _all_served(a, hal_token, backed_up)
    # a workspace whose node is not lost is not restored over: its data is there
    over = _almanac(a, "workspace", "restore", "default", "--owner", "ivy@example.com", "--from",
                    str(backup), "--to", "node-a")  # fmt: skip
    assert over.returncode == 1 and "not declared lost" in over.stderr, over.stderr
    assert cluster.node_of(ivy) == "node-c"
