"""The control plane down (``run:scale-out``; deploy/SCALING.md "What fails, and how"): a real
``almanac serve`` node on a private real PostgreSQL that the test stops and starts again. Every call
that needs the control plane answers 503 ``control_plane_unavailable`` with ``Retry-After`` within
5 s; a token the node verified moments before, for a workspace it holds the lease of, keeps being
served; once PostgreSQL is back, everything is served again by itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.control.clock import epoch
from tests.gateway.cluster.nodes import Cluster, running
from tests.gateway.cluster.test_three_nodes import _call as initialize
from tests.gateway.e2e import Gateway, connect, data, wait_for
from tests.pg import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class _LongLease(Cluster):
    """Leases long enough for a loaded machine to make its calls within one (the outage is short)."""

    def settings(self, name: str) -> dict[str, str]:
        return {**super().settings(name), "node_heartbeat_interval": "1", "placement_lease": "30"}


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    """A PostgreSQL of this module's own: stopping it must not touch the session's."""
    found = PostgresServer.start()
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="module")
def cluster(server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_LongLease]:
    with running(
        _LongLease(server.create_database(), tmp_path_factory.mktemp("cp-down"), {}), ["node-a"]
    ) as c:
        yield c


def _call(node: Gateway, token: str) -> tuple[httpx.Response, float]:
    began = time.monotonic()
    r = initialize(node, token)
    return r, time.monotonic() - began


@pytest.mark.req("run:scale-out")
async def test_postgresql_stopped_answers_503_within_5_s_and_service_resumes_by_itself(
    server: PostgresServer, cluster: _LongLease, tmp_path: Path
) -> None:
    a = cluster.nodes["node-a"]
    a.owner("pg@example.com")
    known = a.token("pg@example.com", "known agent")
    fresh = a.token("pg@example.com", "fresh agent")  # never used before the outage
    async with connect(a, known) as client:
        data(await client.call_tool("remember", {"statement": "written before the outage"}))

    server.halt()
    try:
        # served from what the node knows: a token verified moments ago, a workspace it holds
        async with connect(a, known) as client:
            data(await client.call_tool("remember", {"statement": "written during the outage"}))
        # needs the control plane: refused, quickly, saying when to try again
        for _ in range(3):
            r, took = _call(a, fresh)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "control_plane_unavailable"
            assert int(r.headers["retry-after"]) >= 1
            assert took <= 5.0, took
        rest = httpx.get(a.url + "/api/v1/openapi.json", timeout=30)
        assert rest.status_code == 200  # nothing asked of the control plane: still answered
        # the cluster manifest's readiness probe stays green; /readyz says what is wrong
        assert httpx.get(a.url + "/healthz", timeout=30).status_code == 200
        assert httpx.get(a.url + "/readyz", timeout=30).status_code == 503
    finally:
        server.resume()

    began = time.monotonic()
    wait_for(lambda: _call(a, fresh)[0].status_code == 200, timeout=60, what="service to resume by itself")
    resumed = time.monotonic() - began
    assert resumed <= 30, resumed
    # the node took its name's lock again on a new connection, and renews its leases again
    back = time.time()
    wait_for(
        lambda: epoch(str(cluster.rows("SELECT heartbeat_at FROM nodes WHERE name = 'node-a'")[0][0])) > back,
        what="a heartbeat after the restart",
    )
    second = cluster.serve_refused("node-a", tmp_path / "second")
    assert second.returncode == 2 and "node 'node-a' is already running" in second.stderr, second.stderr
    async with connect(a, fresh) as client:
        for statement in ("written before the outage", "written during the outage"):
            found = await client.call_tool("get_context", {"query": statement})
            assert statement in str(found.content), statement
