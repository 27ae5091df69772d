"""``almanac node list`` / ``almanac node drain`` (run:scale-out) on SQLite and PostgreSQL: a drained
node gets no new workspace, stays drained across its restart, and --undo lets it take them again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.cluster.placement import place
from gateway.control.store import ControlPlane

LEASE = 30.0


def _run(data_dir: Path, database_url: str | None, *args: str) -> tuple[int, str, str]:
    env = {"ALMANAC_DATABASE_URL": database_url} if database_url else {}
    result = CliRunner().invoke(main, [*args, "--data-dir", str(data_dir)], env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _new_workspace(store: ControlPlane, who: str) -> str:
    return store.owners.create(f"{who}@example.com", None)[1].id


@pytest.mark.req("run:scale-out", "run:cli")
def test_drain_a_node_list_it_and_undo(tmp_path: Path, database_url: str | None) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = ControlPlane.connect(database_url, data_dir / "control.db", create=True)
    try:
        now = time.time()
        store.nodes.register("node-a", "http://node-a.internal:8080", now=now)
        store.nodes.register("node-b", "http://node-b.internal:8080", now=now - 3600)  # long silent
        store.nodes.register("node-c", "http://node-c.internal:8080", now=now)
        first = _new_workspace(store, "ada")
        assert place(store.nodes, first, now=now, heartbeat_timeout=LEASE, lease=LEASE).node == "node-a"

        code, out, err = _run(data_dir, database_url, "node", "drain", "node-c")
        assert code == 0, err
        assert "node-c" in err and "draining" in err and "0 workspace(s)" in err
        # the least-loaded live node is node-c, but it is draining: the new workspace goes to node-a
        second = _new_workspace(store, "bob")
        assert place(store.nodes, second, now=now, heartbeat_timeout=LEASE, lease=LEASE).node == "node-a"
        # a restart of node-c keeps it drained
        store.nodes.register("node-c", "http://node-c.internal:8080", now=now)

        code, out, _ = _run(data_dir, database_url, "node", "list")
        assert code == 0
        rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
        assert set(rows) == {"node-a", "node-b", "node-c"}
        assert rows["node-a"][1] == "http://node-a.internal:8080" and rows["node-a"][2].endswith("s")
        assert rows["node-a"][3:] == ["live", "accepting", "2"]
        assert rows["node-b"][3:] == ["down", "accepting", "0"]
        assert rows["node-c"][3:] == ["live", "draining", "0"]

        code, _, err = _run(data_dir, database_url, "node", "drain", "node-c", "--undo")
        assert code == 0 and "accepts new workspaces again" in err
        third = _new_workspace(store, "cy")
        assert place(store.nodes, third, now=now, heartbeat_timeout=LEASE, lease=LEASE).node == "node-c"
    finally:
        store.close()


def test_draining_an_unknown_node_says_so_and_changes_nothing(
    tmp_path: Path, database_url: str | None
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = ControlPlane.connect(database_url, data_dir / "control.db", create=True)
    try:
        store.nodes.register("node-a", "http://node-a.internal:8080", now=time.time())
        code, _, err = _run(data_dir, database_url, "node", "drain", "node-x")
        assert code != 0 and "no node named 'node-x'" in err and len(err.strip().splitlines()) == 1
        assert [n.draining for n in store.nodes.all()] == [False]
    finally:
        store.close()


@pytest.mark.req("run:scale-out", "run:cli")
def test_declare_a_node_lost_list_it_and_undo(tmp_path: Path, database_url: str | None) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = ControlPlane.connect(database_url, data_dir / "control.db", create=True)
    try:
        now = time.time()
        store.nodes.register("node-a", "http://node-a.internal:8080", now=now)
        store.nodes.register("node-b", "http://node-b.internal:8080", now=now)
        store.nodes.place_on(_new_workspace(store, "ada"), "node-b", now=now, lease=LEASE)
        # without --confirm: what it does is said, nothing changes
        code, _, err = _run(data_dir, database_url, "node", "lost", "node-b")
        assert code == 2 and "--confirm" in err and "nothing changed" in err
        # node-b heartbeated just now: refused unless forced
        code, _, err = _run(data_dir, database_url, "node", "lost", "node-b", "--confirm")
        assert code == 1 and "heartbeated" in err and "--force" in err, err
        assert not any(n.lost for n in store.nodes.all())
        code, _, err = _run(data_dir, database_url, "node", "lost", "node-b", "--confirm", "--force")
        assert code == 0 and "declared lost" in err and "1 workspace(s)" in err and "workspace restore" in err
        code, out, _ = _run(data_dir, database_url, "node", "list")
        rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
        assert rows["node-b"][3:] == ["lost", "accepting", "1"] and rows["node-a"][3] == "live"
        code, _, err = _run(data_dir, database_url, "node", "lost", "node-b", "--confirm")
        assert code == 0 and "already declared lost; nothing changed" in err  # idempotent
        code, _, err = _run(data_dir, database_url, "node", "lost", "node-x", "--confirm")
        assert code == 1 and "no node named 'node-x'" in err
        code, _, err = _run(data_dir, database_url, "node", "lost", "node-b", "--undo")
        assert code == 2 and "--confirm" in err
        assert [n.name for n in store.nodes.all() if n.lost] == ["node-b"]
        code, _, err = _run(data_dir, database_url, "node", "lost", "node-b", "--undo", "--confirm")
        assert code == 0 and "no longer lost" in err, err
        assert not any(n.lost for n in store.nodes.all())
        kinds = [e.kind for e in store.audit_log.events(limit=20) if e.kind.startswith("node.")]
        assert kinds == ["node.found", "node.lost"]
    finally:
        store.close()
