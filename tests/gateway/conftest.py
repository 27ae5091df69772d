"""Shared fixtures for the gateway tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.control.store import ControlPlane
from gateway.settings import Settings, load_settings
from tests.pg import PostgresServer

ENGINE = (sys.executable, "-m", "engine")


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Test settings: a private data directory, no embedder unless asked, real engine command."""
    values: dict[str, Any] = {"data_dir": data_dir, "embedder": False, "log_format": "text"}
    values.update(overrides)
    return load_settings(overrides=values)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """Each control-plane test runs twice: on the default SQLite file (None) and on a fresh
    database of the session's PostgreSQL server (its URL)."""
    if request.param == "sqlite":
        return None
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database()


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[ControlPlane]:
    cp = ControlPlane.connect(database_url, tmp_path / "control.db")
    yield cp
    cp.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
