"""``almanac workspace move`` (run:scale-out) before any file moves: what it refuses, and a
workspace placed nowhere yet simply placed on the target. The copy itself, node to node, is
tests/gateway/cluster/test_three_nodes.py's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.control.store import ControlPlane

SECRET = "s" * 40


def _move(data_dir: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main,
        ["workspace", "move", "default", *args, "--data-dir", str(data_dir)],
        env=env,
        catch_exceptions=False,
    )
    return result.exit_code, result.stderr


@pytest.mark.req("run:scale-out", "run:cli")
def test_a_move_needs_the_nodes_control_plane_and_secret_and_live_nodes(
    tmp_path: Path, database_url: str | None
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = ControlPlane.connect(database_url, data_dir / "control.db", create=True)
    try:
        now = time.time()
        ada = store.owners.create("ada@example.com", None)[1].id
        bob = store.owners.create("bob@example.com", None)[1].id
        if database_url is None:  # one host: there is nowhere to move to
            code, err = _move(
                data_dir, {"ALMANAC_CLUSTER_SECRET": SECRET}, "--owner", "ada@example.com", "--to", "a"
            )
            assert code == 2 and "ALMANAC_DATABASE_URL" in err
            return
        env = {"ALMANAC_DATABASE_URL": database_url}
        code, err = _move(data_dir, env, "--owner", "ada@example.com", "--to", "node-a")
        assert code == 2 and "ALMANAC_CLUSTER_SECRET" in err
        env["ALMANAC_CLUSTER_SECRET"] = SECRET
        store.nodes.register("node-a", "http://node-a.internal:8080", now=now)
        store.nodes.register("node-b", "http://node-b.internal:8080", now=now - 3600)  # long silent
        code, err = _move(data_dir, env, "--owner", "ada@example.com", "--to", "node-z")
        assert code == 1 and "no node named 'node-z'" in err
        code, err = _move(data_dir, env, "--owner", "ada@example.com", "--to", "node-b")
        assert code == 1 and "has not been heard from" in err
        assert store.nodes.placement(ada) is None  # nothing changed
        code, err = _move(data_dir, env, "--owner", "ada@example.com")
        assert code == 2 and "exactly one of --to NODE, --status or --finish" in err
        code, err = _move(data_dir, env, "--owner", "ada@example.com", "--to", "node-a", "--finish")
        assert code == 2 and "exactly one of" in err
        code, err = _move(data_dir, env, "--owner", "ada@example.com", "--finish")
        assert code == 1 and "never moved; there is nothing to finish" in err
        assert store.nodes.placement(ada) is None and store.moves.of_workspace(ada) == []  # nothing changed
        code, err = _move(data_dir, env, "--owner", "ada@example.com", "--to", "node-a")
        assert code == 0, err
        assert store.nodes.placement(ada).node == "node-a"  # type: ignore[union-attr]  # placed, nothing to copy
        code, err = _move(data_dir, env, "--owner", "ada@example.com", "--to", "node-a")
        assert code == 1 and "already on node 'node-a'" in err
        store.nodes.place_on(bob, "node-b", now=now - 3600, lease=30.0)
        code, err = _move(data_dir, env, "--owner", "bob@example.com", "--to", "node-a")
        assert code == 1 and "start it again before moving" in err
        assert store.nodes.placement(bob).node == "node-b"  # type: ignore[union-attr]  # its files are there
    finally:
        store.close()
