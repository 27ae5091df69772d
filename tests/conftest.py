"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import PostgresServer


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the test session (see tests/pg.py), started on first use."""
    server = PostgresServer.start()
    yield server
    server.stop()
