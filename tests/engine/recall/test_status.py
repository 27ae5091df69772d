"""``memory_status``: storage without retired or derived files, settings with their origin."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.recall.status import memory_status
from tests.engine.ageing.helpers import CALLER, aged_engine
from tests.engine.conftest import Clock


@pytest.mark.req("recall:status")
def test_retired_memories_leave_the_storage_count(tmp_path: Path) -> None:
    with aged_engine(tmp_path / "ws", Clock(datetime(2026, 2, 1, tzinfo=UTC))) as e:
        e.memory.remember(CALLER, "small note")
        big = e.memory.remember(CALLER, "a big note " * 300).id
        with_big = memory_status(e.recall, CALLER)["storage_bytes"]["store"]
        e.recall.get_context(CALLER, "big note")  # the retrieval log and citations are not memories
        assert memory_status(e.recall, CALLER)["storage_bytes"]["store"] == with_big
        e.memory.retire(CALLER, big)
        without = memory_status(e.recall, CALLER)["storage_bytes"]["store"]
        assert with_big - without > 3000
        e.memory.restore(CALLER, big)
        assert memory_status(e.recall, CALLER)["storage_bytes"]["store"] >= with_big


@pytest.mark.req("settings:layers")
def test_status_shows_each_setting_and_where_it_came_from(tmp_path: Path) -> None:
    layer = {"half_life_days": 90, "notes_limit": 7}
    with aged_engine(tmp_path / "ws", Clock(datetime(2026, 2, 1, tzinfo=UTC)), layer) as e:
        status = memory_status(e.recall, CALLER)
        assert status["settings"]["half_life_days"] == 90.0 and status["settings"]["notes_limit"] == 7
        assert status["settings_origin"]["half_life_days"] == "workspace"
        assert status["settings_origin"]["max_tokens_default"] == "default"
        assert status["settings_problems"] == []
        json.dumps(status)
