"""A restore whose command dies half-way never strands a workspace nor serves a half-copied folder
(``run:scale-out``): a real PostgreSQL control plane, two real ``almanac serve`` nodes
(node-c declared lost, node-a the target), and the real ``almanac workspace restore`` as a
subprocess, stopped at a seam between two of its steps (``ALMANAC_TEST_MOVE_PAUSE``) and SIGKILLed.

While it runs the workspace answers 503 ``workspace_restoring`` (with ``Retry-After``), a second
restore is refused naming ``--abandon``; ``--abandon`` makes it lost again at once (410
``workspace_lost``) and the target removes what it had received; a restore killed after the target
settled its copy is called off once its deadline passes (``ALMANAC_MOVE_TIMEOUT=2``): lost again,
the settled copy removed by the target and never opened; a restore killed after the switch is
finished by running the same restore again, and running it once more changes nothing. Every write
in the backup is served in the end."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from tests.gateway.cluster.nodes import Cluster, started_nodes
from tests.gateway.cluster.test_interrupted_moves import (
    MOVE_TIMEOUT,
    _all_served,
    _almanac,
    _at,
    _env,
    _write,
)
from tests.gateway.cluster.test_recovery import _heard_from, _lost, _owner_on
from tests.gateway.cluster.test_three_nodes import _call
from tests.gateway.e2e import ALMANAC, Gateway, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EMAIL = "lea@example.com"


cluster = started_nodes("cluster", "restores", ("node-a", "node-c"), Cluster)


def _restore_args(backup: Path) -> list[str]:
    return ["workspace", "restore", "default", "--owner", EMAIL, "--from", str(backup), "--to", "node-a"]


def _killed_at(
    node: Gateway,
    backup: Path,
    seam: str,
    tmp: Path,
    while_paused: Callable[[], None],
    timeout: str = MOVE_TIMEOUT,
) -> None:
    """Run the restore (its deadline ``timeout`` seconds ahead of each step), let it reach
    ``seam``, check ``while_paused``, and SIGKILL it there."""
    gate = tmp / f"gate-{seam}"
    proc = subprocess.Popen(
        [ALMANAC, *_restore_args(backup), *_at(node)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(node, ALMANAC_TEST_MOVE_PAUSE=f"{seam}:{gate}", ALMANAC_MOVE_TIMEOUT=timeout),
    )
    try:
        wait_for(
            lambda: Path(f"{gate}.reached").exists() or proc.poll() is not None,
            timeout=60,
            what=f"the restore to reach {seam}",
        )
        assert proc.poll() is None, proc.communicate()
        while_paused()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)


def _restoring(response: httpx.Response) -> bool:
    if response.status_code != 503 or "retry-after" not in response.headers:
        return False
    error = response.json()["error"]
    return error["code"] == "workspace_restoring" and "restored from a backup" in error["message"]


def _last_move(cluster: Cluster, workspace: str) -> tuple[str, str]:
    rows = cluster.rows(
        "SELECT state, note FROM moves WHERE workspace_id = %s ORDER BY began_at DESC, id DESC LIMIT 1",
        workspace,
    )
    return str(rows[0][0]), str(rows[0][1])


@pytest.mark.req("run:scale-out")
async def test_a_restore_killed_half_way_is_refused_meanwhile_abandoned_or_called_off_and_redone(
    cluster: Cluster, tmp_path: Path
) -> None:
    a = cluster.nodes["node-a"]
    _, workspace, token = _owner_on(cluster, EMAIL, "node-c")
    written = [f"lea charts the {w} before the backup" for w in ("sandbar", "breakwater", "jetty", "cove")]
    await _write(a, token, written)  # forwarded to node-c
    backup = tmp_path / "backup" / workspace
    shutil.copytree(
        cluster.nodes["node-c"].data_dir / "workspaces" / workspace,
        backup,
        ignore=shutil.ignore_patterns(".index", ".cache", "*.lock"),
    )
    assert len([p for p in backup.rglob("*") if p.is_file()]) >= 2  # a "half-sent" seam between files
    cluster.kill("node-c")
    wait_for(lambda: time.time() - _heard_from(cluster, "node-c") > 2.5, timeout=30, what="node-c silent")
    declared = _almanac(a, "node", "lost", "node-c", "--confirm")
    assert declared.returncode == 0, declared.stderr
    assert _lost(_call(a, token))
    folder = a.data_dir / "workspaces" / workspace
    staging = a.data_dir / "workspaces" / f".incoming-{workspace}"

    # 1. killed half-way through sending: refused as restoring meanwhile, then abandoned
    def half_sent() -> None:
        assert _restoring(_call(a, token)), _call(a, token).text
        assert staging.is_dir() and not folder.exists()  # received into staging only
        second = _almanac(a, *_restore_args(backup))
        assert second.returncode == 1 and "another restore" in second.stderr, second.stderr
        assert "--abandon" in second.stderr

    # (a deadline far enough ahead for the operator to abandon it before it lapses)
    await anyio.to_thread.run_sync(lambda: _killed_at(a, backup, "half-sent", tmp_path, half_sent, "120"))
    assert _restoring(_call(a, token))  # the command is dead, its deadline not yet passed
    abandoned = _almanac(a, "workspace", "restore", "default", "--owner", EMAIL, "--abandon")
    assert abandoned.returncode == 0 and "it is lost" in abandoned.stderr, abandoned.stderr
    assert _lost(_call(a, token)) and not staging.exists() and not folder.exists()
    assert not staging.with_name(staging.name + ".receiving").exists()  # nor a half-received file
    assert _last_move(cluster, workspace)[0] == "discarded"
    again = _almanac(a, "workspace", "restore", "default", "--owner", EMAIL, "--abandon")
    assert again.returncode == 1 and "no restore" in again.stderr, again.stderr
    events = cluster.rows("SELECT kind FROM audit_events WHERE workspace_id = %s", workspace)
    kinds = [str(k) for (k,) in events]
    assert "workspace.restore.abandon" in kinds

    # 2. killed once node-a settled a full copy, before the switch: called off at its deadline,
    # the copy removed by node-a, never opened
    def settled() -> None:
        assert folder.is_dir() and _restoring(_call(a, token))

    await anyio.to_thread.run_sync(lambda: _killed_at(a, backup, "settled", tmp_path, settled))
    wait_for(lambda: _lost(_call(a, token)), timeout=30, what="the killed restore to lapse")
    lapsed = _call(a, token).json()["error"]["message"]
    assert "stopped half-way" in lapsed or "declared lost" in lapsed, lapsed
    wait_for(lambda: not folder.exists() and not staging.exists(), timeout=30, what="node-a to discard")
    assert not any(p.name == workspace for p in a.engines())
    assert _last_move(cluster, workspace)[0] in ("called_off", "discarded")

    # 3. killed right after the switch: running the same restore again finishes it
    await anyio.to_thread.run_sync(lambda: _killed_at(a, backup, "flipped", tmp_path, lambda: None))
    assert cluster.node_of(workspace) == "node-a" and _last_move(cluster, workspace)[0] == "flipped"
    finished = _almanac(a, *_restore_args(backup))
    assert finished.returncode == 0 and "by an earlier run; opening it" in finished.stderr, finished.stderr
    assert _last_move(cluster, workspace)[0] == "served"
    await _all_served(a, token, written)
    for path in backup.rglob("*"):
        if path.is_file():
            assert (folder / path.relative_to(backup)).read_bytes() == path.read_bytes(), path
    once_more = _almanac(a, *_restore_args(backup))
    assert once_more.returncode == 0 and "already restored" in once_more.stderr, once_more.stderr
    elsewhere = tmp_path / "another-backup"  # another backup named: refused, nothing changed
    shutil.copytree(backup, elsewhere)
    other = _almanac(a, *_restore_args(elsewhere))
    assert other.returncode == 1 and "not restored again" in other.stderr, other.stderr
    assert str(backup) in other.stderr  # says which backup it was restored from
    assert _last_move(cluster, workspace)[0] == "served" and cluster.node_of(workspace) == "node-a"
