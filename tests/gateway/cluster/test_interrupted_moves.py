"""A move whose command dies half-way never strands a workspace (``run:scale-out``):
a real PostgreSQL control plane, two real ``almanac serve`` nodes, and the real ``almanac workspace
move`` command as a subprocess, stopped at a seam between two of its steps (it waits on a file there:
``ALMANAC_TEST_MOVE_PAUSE``) and killed with SIGKILL.

Killed before the switch: within the move's deadline (``ALMANAC_MOVE_TIMEOUT=2``) the source calls it
off and serves the workspace again with every acknowledged write; the target removes its unused copy.
Killed after the switch (before or after the target served it): the workspace serves from the
target, the old copy stays until ``--finish`` deletes it, and no write is lost. Refusals exit
non-zero and change nothing.

Erasing the account (SPEC §5 ``life:delete``) erases every copy: the old copy a killed move left on
the source too, by that node, before any row goes; with that node down the erase stays unfinished
(the copy still listed by ``almanac node stale``) until ``almanac owner erase --finish`` once it is
back. An erase is refused while a move is under way."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from gateway.auth.passwords import hash_password
from gateway.cluster import signing
from gateway.control.clock import epoch
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest
from tests.gateway.cluster.nodes import SECRET, Cluster, started_nodes
from tests.gateway.cluster.test_three_nodes import _call
from tests.gateway.e2e import ALMANAC, Gateway, clean_env, connect, data, files_containing, wait_for
from tests.gateway.web.conftest import csrf_of
from tests.gateway.web.test_pages import PASSWORD

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

MOVE_TIMEOUT = "2"


cluster = started_nodes("cluster", "moves", ("node-a", "node-b"), Cluster)


def _owner_on_a(cluster: Cluster, email: str) -> tuple[str, str]:
    """A new owner (password :data:`PASSWORD`) whose workspace is placed on node-a; (its workspace
    id, a token)."""
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        owner, workspace = store.owners.create(email, hash_password(PASSWORD))
        store.nodes.place_on(workspace.id, "node-a", now=time.time(), lease=2.0)
        return workspace.id, store.connections.create_pat(owner.id, workspace.id, "agent")[1]
    finally:
        store.close()


def _env(node: Gateway, **extra: str) -> dict[str, str]:
    return clean_env(
        {
            **node.cli_env,
            "ALMANAC_CLUSTER_SECRET": SECRET,
            "ALMANAC_MOVE_TIMEOUT": MOVE_TIMEOUT,
            "ALMANAC_PLACEMENT_LEASE": "2",
            **extra,
        }
    )


def _at(node: Gateway) -> list[str]:
    return ["--data-dir", str(node.data_dir)]


def _run(node: Gateway, email: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ALMANAC, "workspace", "move", "default", "--owner", email, *args, "--data-dir", str(node.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(node),
    )


def _almanac(node: Gateway, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ALMANAC, *args, *_at(node)], capture_output=True, text=True, timeout=120, env=_env(node)
    )


def _signed_by_a_node(method: str, path: str, workspace: str) -> dict[str, str]:
    """The headers of a correctly signed node-to-node call to node-a about ``workspace``."""
    signed = signing.sign(
        SECRET, method=method, path=path, principal=None, workspace_id=workspace, target="node-a",
        body=b"", now=time.time(),
    )  # fmt: skip
    return {
        signing.PRINCIPAL_HEADER.decode(): signed.principal,
        signing.SIGNATURE_HEADER.decode(): signed.signature,
    }


def _erase_on(node: Gateway, email: str) -> httpx.Response:
    """Sign in on ``node`` and erase the account on its Account page (confirmed with the email)."""
    with httpx.Client(base_url=node.url, timeout=60, headers={"Accept": "text/html"}) as browser:
        login = browser.get("/login")
        form = {"csrf_token": csrf_of(login.text), "email": email, "password": PASSWORD}
        assert browser.post("/login", data=form).status_code == 303
        account = browser.get("/account")
        return browser.post("/account/erase", data={"csrf_token": csrf_of(account.text), "confirm": email})


def _killed_at(
    node: Gateway, email: str, target: str, seam: str, tmp: Path, while_paused: Callable[[], None]
) -> None:
    """Run ``workspace move`` to ``target``, let it reach ``seam``, check ``while_paused``, and
    SIGKILL it there."""
    gate = tmp / f"gate-{seam}"
    proc = subprocess.Popen(
        [ALMANAC, "workspace", "move", "default", "--owner", email, "--to", target, *_at(node)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(node, ALMANAC_TEST_MOVE_PAUSE=f"{seam}:{gate}"),
    )
    try:
        wait_for(
            lambda: Path(f"{gate}.reached").exists() or proc.poll() is not None,
            timeout=60,
            what=f"the move to reach {seam}",
        )
        assert proc.poll() is None, proc.communicate()
        while_paused()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)


async def _write(node: Gateway, token: str, statements: list[str]) -> None:
    async with connect(node, token) as client:
        for statement in statements:
            data(await client.call_tool("remember", {"statement": statement}))


async def _all_served(node: Gateway, token: str, statements: list[str]) -> None:
    async with connect(node, token) as client:
        for statement in statements:
            found = await client.call_tool("get_context", {"query": statement})
            assert statement in str(found.content), statement


def _record(cluster: Cluster, workspace: str) -> tuple[str, str]:
    rows = cluster.rows(
        "SELECT id, state FROM moves WHERE workspace_id = %s ORDER BY began_at DESC LIMIT 1", workspace
    )
    return str(rows[0][0]), str(rows[0][1])


@pytest.mark.req("run:scale-out")
async def test_a_move_killed_before_the_switch_is_called_off_and_the_source_serves_every_write(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _owner_on_a(cluster, "ada@example.com")
    written = [f"ada keeps the {w} ledger" for w in ("harbour", "lantern", "orchard", "quarry", "meadow")]
    await _write(b, token, written)  # through node-b, served on node-a

    def paused() -> None:  # a checked copy on node-b, not switched: refused everywhere meanwhile
        assert (b.data_dir / "workspaces" / workspace).is_dir()
        # the command is alive: it keeps the move's deadline ahead, long past its first one
        first = epoch(
            str(cluster.rows("SELECT began_at FROM moves WHERE workspace_id = %s", workspace)[0][0])
        )
        wait_for(lambda: time.time() > first + 2 * float(MOVE_TIMEOUT), timeout=20, what="two timeouts")
        still = cluster.rows(
            "SELECT moving_to, move_deadline FROM placements WHERE workspace_id = %s", workspace
        )
        assert still[0][0] == "node-b" and epoch(str(still[0][1])) > time.time(), still
        for edge in (a, b):
            refused = _call(edge, token)
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "workspace_moving"
        under_way = _run(a, "ada@example.com", "--status")
        assert "on node-a (moving to node-b; called off unless advanced within" in under_way.stdout
        assert "\tcopied\tunder way" in under_way.stdout, under_way.stdout
        busy = _run(a, "ada@example.com", "--finish")  # nothing to finish while it is under way
        assert busy.returncode == 1 and "still under way" in busy.stderr, busy.stderr
        other = _run(a, "ada@example.com", "--to", "node-b")  # nor a second move beside it
        assert other.returncode == 1 and "another move" in other.stderr, other.stderr
        erase = _erase_on(b, "ada@example.com")  # nor an account erase: refused, nothing changed
        assert erase.status_code == 409 and "is under way" in erase.text, erase.text
        assert "nothing was erased" in erase.text
        (locked,) = cluster.rows("SELECT disabled_at FROM owners WHERE email = %s", "ada@example.com")
        assert locked[0] is None

    await anyio.to_thread.run_sync(
        lambda: _killed_at(a, "ada@example.com", "node-b", "copied", tmp_path, paused)
    )
    assert cluster.node_of(workspace) == "node-a"
    move_id, state = _record(cluster, workspace)
    # … then, within the deadline, node-a calls the move off and serves it again
    wait_for(
        lambda: all(_call(edge, token).status_code == 200 for edge in (a, b)),
        timeout=30,
        what="node-a to call the dead command's move off and serve again",
    )
    assert cluster.node_of(workspace) == "node-a"
    await _all_served(b, token, written)
    assert all(files_containing(a.data_dir / "workspaces" / workspace, s) for s in written)
    wait_for(
        lambda: _record(cluster, workspace)[1] == "discarded",
        timeout=30,
        what="node-b to remove the copy of the move called off",
    )
    assert not (b.data_dir / "workspaces" / workspace).exists()
    assert not (b.data_dir / "workspaces" / f".incoming-{workspace}").exists()
    assert state in ("copied", "called_off", "discarded")
    # a late flip of that move is refused: there is never a second live copy
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        stopped = store.moves.by_id(move_id)
        assert stopped is not None and "stopped advancing" in stopped.note
        with pytest.raises(BadRequest, match="no longer under way"):
            store.moves.finish(stopped, now=time.time(), lease=2.0)
    finally:
        store.close()
    assert cluster.node_of(workspace) == "node-a"
    # --finish of a move called off: refused, nothing changes
    refused = _run(a, "ada@example.com", "--finish")
    assert refused.returncode == 1 and "called off before the switch" in refused.stderr, refused.stderr
    assert all(files_containing(a.data_dir / "workspaces" / workspace, s) for s in written)
    status = _run(a, "ada@example.com", "--status")
    assert status.returncode == 0, status.stderr
    assert f"{move_id}\tnode-a -> node-b\tdiscarded" in status.stdout
    assert "on node-a" in status.stdout


@pytest.mark.req("run:scale-out")
async def test_a_move_killed_after_the_switch_is_finished_by_finish_and_keeps_every_write(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _owner_on_a(cluster, "bob@example.com")
    before = [f"bob tends the {w} before the move" for w in ("beehive", "compass", "furnace", "glacier")]
    await _write(a, token, before)
    never = _run(a, "bob@example.com", "--finish")
    assert never.returncode == 1 and "never moved" in never.stderr, never.stderr
    await anyio.to_thread.run_sync(
        lambda: _killed_at(a, "bob@example.com", "node-b", "flipped", tmp_path, lambda: None)
    )
    # switched: node-b serves it (through either node) while node-a keeps the old copy
    assert cluster.node_of(workspace) == "node-b"
    wait_for(
        lambda: all(_call(edge, token).status_code == 200 for edge in (a, b)),
        timeout=30,
        what="the switched workspace to serve from node-b",
    )
    after = [f"bob mends the {w} after the switch" for w in ("anchor", "bellows", "chisel")]
    await _write(a, token, after)
    assert all(files_containing(a.data_dir / "workspaces" / workspace, s) for s in before)
    # node-b has not been asked to serve it yet (the move stopped at "flipped"): node-a refuses to
    # delete its copy, even asked by a correctly signed call
    path = f"/internal/v1/workspaces/{workspace}"
    headers = _signed_by_a_node("DELETE", path, workspace)
    kept = httpx.delete(a.url + path, headers=headers, timeout=30)
    assert kept.status_code == 403 and "does not make this node's copy stale" in kept.text, kept.text
    assert all(files_containing(a.data_dir / "workspaces" / workspace, s) for s in before)
    stale = _almanac(a, "node", "stale")
    assert stale.returncode == 0, stale.stderr
    (line,) = [row for row in stale.stdout.splitlines() if workspace in row]
    assert line.startswith(f"node-a\t{workspace}\t") and "--finish" in line
    finished = _run(a, "bob@example.com", "--finish")
    assert finished.returncode == 0, finished.stderr
    assert "old copy on node-a is deleted" in finished.stderr
    assert not (a.data_dir / "workspaces" / workspace).exists()
    assert _record(cluster, workspace)[1] == "cleaned"
    for statement in before + after:
        assert files_containing(b.data_dir / "workspaces" / workspace, statement), statement
    await _all_served(a, token, before + after)
    again = _run(a, "bob@example.com", "--finish")
    assert again.returncode == 1 and "already deleted" in again.stderr, again.stderr
    kinds = [
        str(k)
        for (k,) in cluster.rows(
            "SELECT kind FROM audit_events WHERE workspace_id = %s ORDER BY id", workspace
        )
    ]
    assert kinds[-3:] == ["workspace.move.begin", "workspace.move.flip", "workspace.move.cleaned"]


@pytest.mark.req("run:scale-out")
async def test_a_move_killed_after_the_target_served_it_is_finished_by_finish_and_keeps_every_write(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _owner_on_a(cluster, "eve@example.com")
    before = [f"eve winds the {w} before the move" for w in ("sextant", "spindle", "trellis")]
    await _write(b, token, before)
    await anyio.to_thread.run_sync(
        lambda: _killed_at(a, "eve@example.com", "node-b", "served", tmp_path, lambda: None)
    )
    assert cluster.node_of(workspace) == "node-b" and _record(cluster, workspace)[1] == "served"
    assert all(files_containing(a.data_dir / "workspaces" / workspace, s) for s in before)  # kept
    after = [f"eve oils the {w} after the switch" for w in ("tiller", "windlass")]
    await _write(a, token, after)
    finished = _run(a, "eve@example.com", "--finish")
    assert finished.returncode == 0, finished.stderr
    assert not (a.data_dir / "workspaces" / workspace).exists()
    assert _record(cluster, workspace)[1] == "cleaned"
    for statement in before + after:
        assert files_containing(b.data_dir / "workspaces" / workspace, statement), statement
    await _all_served(a, token, before + after)


def _erased(cluster: Cluster, email: str, workspace: str) -> None:
    """Nothing of the account is left: no copy on any node, no row, nothing listed as stale."""
    for node in cluster.nodes.values():
        assert not (node.data_dir / "workspaces" / workspace).exists(), node.data_dir
        assert not (node.data_dir / "workspaces" / f".incoming-{workspace}").exists()
        assert not any(p.name == workspace for p in node.engines())
    assert not cluster.rows("SELECT id FROM owners WHERE email = %s", email)
    assert not cluster.rows("SELECT id FROM moves WHERE workspace_id = %s", workspace)
    stale = _almanac(cluster.nodes["node-b"], "node", "stale")
    assert stale.returncode == 0 and stale.stdout == "", stale.stdout + stale.stderr


@pytest.mark.req("run:scale-out")
@pytest.mark.req("life:delete")
async def test_erasing_the_account_erases_the_old_copy_a_killed_move_left_on_another_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _owner_on_a(cluster, "cy@example.com")
    await _write(a, token, ["cy's private almanac of tides"])
    await anyio.to_thread.run_sync(
        lambda: _killed_at(a, "cy@example.com", "node-b", "flipped", tmp_path, lambda: None)
    )
    assert files_containing(a.data_dir / "workspaces" / workspace, "almanac of tides")  # the old copy
    assert files_containing(b.data_dir / "workspaces" / workspace, "almanac of tides")  # placed here
    # node-a erases a copy only for an account being erased: refused now, unsigned or signed right
    path = f"/internal/v1/workspaces/{workspace}/erase"
    unsigned = httpx.post(a.url + path, timeout=30)
    assert unsigned.status_code == 401, unsigned.text
    headers = _signed_by_a_node("POST", path, workspace)
    kept = httpx.post(a.url + path, headers=headers, timeout=30)
    assert kept.status_code == 403 and "not being erased" in kept.text, kept.text
    assert files_containing(a.data_dir / "workspaces" / workspace, "almanac of tides")
    # erased on node-b, which holds the placed copy only: node-a erases its old copy itself
    erased = await anyio.to_thread.run_sync(lambda: _erase_on(b, "cy@example.com"))
    assert erased.status_code == 303 and erased.headers["location"] == "/login?erased=1", erased.text
    _erased(cluster, "cy@example.com", workspace)


@pytest.mark.req("run:scale-out")
@pytest.mark.req("life:delete")
async def test_an_erase_whose_old_copy_node_is_down_stays_unfinished_until_finish(
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    workspace, token = _owner_on_a(cluster, "dee@example.com")
    await _write(a, token, ["dee's private ledger of debts"])
    await anyio.to_thread.run_sync(
        lambda: _killed_at(a, "dee@example.com", "node-b", "flipped", tmp_path, lambda: None)
    )
    cluster.kill("node-a")  # holds the old copy
    try:
        erased = await anyio.to_thread.run_sync(lambda: _erase_on(b, "dee@example.com"))
        assert erased.status_code == 303 and erased.headers["location"] == "/login?erased=partly"
        # unfinished: the account is locked out, its rows kept, the old copy still listed
        assert _call(b, token).status_code == 401
        assert cluster.rows("SELECT disabled_at FROM owners WHERE email = %s", "dee@example.com")[0][0]
        assert not (b.data_dir / "workspaces" / workspace).exists()  # the placed copy is gone
        assert files_containing(a.data_dir / "workspaces" / workspace, "ledger of debts")
        stale = _almanac(b, "node", "stale")
        assert any(line.startswith(f"node-a\t{workspace}\t") for line in stale.stdout.splitlines())
        early = _almanac(b, "owner", "erase", "dee@example.com", "--finish")  # node-a still down
        assert early.returncode == 1 and "node 'node-a'" in early.stderr, early.stderr
        assert "still locked out" in early.stderr
        assert files_containing(a.data_dir / "workspaces" / workspace, "ledger of debts")
    finally:
        await anyio.to_thread.run_sync(cluster.start, "node-a")
    done = _almanac(b, "owner", "erase", "dee@example.com", "--finish")
    assert done.returncode == 0, done.stderr
    assert "erased the account" in done.stderr
    _erased(cluster, "dee@example.com", workspace)
