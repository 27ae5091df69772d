"""Real ``almanac serve`` nodes on loopback sharing one real PostgreSQL control plane: what every
cluster test starts (each node with its own data directory and log), and stops at the end."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from tests.gateway.e2e import ALMANAC, Gateway, clean_env, start_gateway
from tests.pg import PostgresServer

SECRET = "cluster-secret-" + "x" * 40


@dataclass
class Cluster:
    url: str  # the control plane
    root: Path
    nodes: dict[str, Gateway]

    def settings(self, name: str) -> dict[str, str]:
        """The settings every node ``name`` starts with (``almanac serve``'s ``ALMANAC_…`` variables)."""
        return {
            "database_url": self.url,
            "node": name,
            "advertise_url": "http://127.0.0.1:0",
            "cluster_secret": SECRET,
            "node_heartbeat_interval": "0.2",
            "placement_lease": "2",
            "retry_after": "1",
            "engine_warm_spare": "false",
            "engine_start_timeout": "60",  # a loaded CI machine: a refusal here would test nothing
        }

    def start(self, name: str, data_dir: Path | None = None) -> Gateway:
        """Node ``name`` on its own data directory (``root/name``), or on ``data_dir``."""
        node = start_gateway(data_dir or self.root / name, self.root / f"{name}.log", **self.settings(name))
        self.nodes[name] = node
        return node

    def serve_refused(self, name: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
        """``almanac serve`` as node ``name`` on ``data_dir``, expected to stop at start: its output."""
        settings = {"embedder": "false", **self.settings(name)}
        return subprocess.run(
            [ALMANAC, "serve", "--port", "0", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env({f"ALMANAC_{k.upper()}": v for k, v in settings.items()}),
        )

    def admin(
        self,
        name: str,
        *args: str,
        settings: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        without: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """``almanac ARGS`` as an operator runs it where node ``name`` runs: on its data directory,
        with its settings (or ``settings``) as ``ALMANAC_…`` variables, plus ``env``, and none of the
        inherited variables named in ``without``."""
        chosen = self.settings(name) if settings is None else settings
        variables = clean_env({**{f"ALMANAC_{k.upper()}": v for k, v in chosen.items()}, **(env or {})})
        return subprocess.run(
            [ALMANAC, *args, "--data-dir", str(self.root / name)],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in variables.items() if k not in without},
        )

    def kill(self, name: str) -> None:
        """SIGKILL the node (its engines exit with it): no goodbye, no graceful stop."""
        node = self.nodes[name]
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(timeout=30)
        node.reader.join(timeout=10)
        assert node.proc.stdout is not None
        node.proc.stdout.close()

    def rows(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return list(conn.execute(sql.encode(), params).fetchall())

    def node_of(self, workspace_id: str) -> str:
        return str(self.rows("SELECT node FROM placements WHERE workspace_id = %s", workspace_id)[0][0])

    def workspace_id(self, email: str) -> str:
        found = self.rows(
            "SELECT w.id FROM workspaces w JOIN owners o ON o.id = w.owner_id WHERE o.email = %s", email
        )
        return str(found[0][0])


C = TypeVar("C", bound=Cluster)


@contextmanager
def running(cluster: C, names: Sequence[str]) -> Iterator[C]:
    """``cluster`` with the nodes ``names`` started at once (a module fixture then waits for the
    slowest start, not their sum); every node still running is stopped at the end."""
    try:
        with ThreadPoolExecutor(len(names)) as pool:
            list(pool.map(cluster.start, names))
        yield cluster
    finally:
        for node in cluster.nodes.values():
            if node.proc.poll() is None:
                node.stop()


def started_nodes(name: str, folder: str, names: Sequence[str], kind: type[C]) -> Any:
    """A module fixture called ``name``: ``kind`` over a new database of the session's PostgreSQL
    and a temporary ``folder``, with the nodes ``names`` running (:func:`running`)."""

    @pytest.fixture(scope="module", name=name)
    def fixture(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[C]:
        with running(kind(postgres.create_database(), tmp_path_factory.mktemp(folder), {}), names) as found:
            yield found

    return fixture
