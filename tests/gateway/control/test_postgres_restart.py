"""The control plane on PostgreSQL outlives a restart of the database server: the connections the
pool held die with it, and the next calls get fresh ones instead of failing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.control.store import ControlPlane
from tests.pg import PostgresServer


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of this test's own (the session's one is shared and must not be restarted)."""
    server = PostgresServer.start()
    yield server
    server.stop()


@pytest.mark.req("run:scale-out")
def test_calls_after_a_database_restart_succeed(own_server: PostgresServer) -> None:
    store = ControlPlane.open_url(own_server.create_database())
    try:
        owner, ws = store.owners.create("ada@example.com", None)
        _, secret = store.connections.create_pat(owner.id, ws.id, "laptop")
        assert store.connections.authenticate(secret) is not None
        own_server.restart()
        principal = store.connections.authenticate(secret)  # the pooled connection is dead; a new one serves
        assert principal is not None and principal.connection_name == "laptop"
        own_server.restart()
        store.connections.create_pat(owner.id, ws.id, "desktop")  # a transaction first after the restart
        assert [c.name for c in store.connections.of_owner(owner.id)] == ["laptop", "desktop"]
    finally:
        store.close()
