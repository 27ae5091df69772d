"""Fixtures for engine tests: a real workspace directory, a controllable clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.memory import Memory
from engine.store.workspace import Workspace


class Clock:
    """Starts at a fixed time and moves 1 ms per reading; ``set`` jumps."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 3, 14, 9, 0, tzinfo=UTC))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def workspace(root: Path) -> Iterator[Workspace]:
    ws = Workspace(root)
    ws.open()
    yield ws
    ws.close()


@pytest.fixture
def memory(workspace: Workspace, clock: Clock) -> Memory:
    return Memory(workspace, clock=clock)
