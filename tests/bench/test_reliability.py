"""The reliability harnesses, short (``rel:kill``, ``rel:concurrency``, ``rel:load``); the long runs
are ``python -m bench.reliability``. Each harness runs real engines and gateways and kills them."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from bench.reliability import check, cold, concurrency, disk, kill, load

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.req("rel:kill", "store:durable")
async def test_kill_9_of_a_lone_engine_loses_no_acknowledged_write(tmp_path: Path) -> None:
    out = await kill.kill_lone_engine(tmp_path, trials=3, rng=random.Random(7))
    assert out.problems == []
    assert out.kills == 3 and out.journal.acked >= 10
    kinds = {m.kind for m in out.journal.memories.values()}
    assert kinds == {"fact", "note", "log"}
    # The checks can fail: a log entry copied into a second day file, or a lost note, is caught.
    store = disk.scan(tmp_path / "workspace")
    log_id, (path, _) = next(iter(store.log_at.items()))
    entry = path.read_text(encoding="utf-8")
    twin = tmp_path / "workspace" / "retired" / path.relative_to(tmp_path / "workspace")
    twin.parent.mkdir(parents=True, exist_ok=True)
    twin.write_text(entry, encoding="utf-8")
    note_id, (note_path, *_) = next(iter(store.notes.items()))
    note_path.unlink()
    problems = check.check_disk(tmp_path / "workspace", out.journal)
    assert any(log_id in p and "2 files" in p for p in problems)
    assert any(note_id in p and "0 files" in p for p in problems) or note_id not in out.journal.memories


@pytest.mark.req("rel:kill", "gw:spawn")
async def test_kill_9_of_an_engine_under_the_gateway_loses_nothing(tmp_path: Path) -> None:
    out = await kill.kill_engine_under_gateway(tmp_path, trials=2, rng=random.Random(11))
    assert out.problems == []
    assert out.kills == 2 and out.journal.acked >= 5


@pytest.mark.req("rel:kill")
async def test_kill_9_of_the_gateway_itself_loses_nothing(tmp_path: Path) -> None:
    out = await kill.kill_gateway(tmp_path, trials=2, rng=random.Random(13))
    assert out.problems == []
    assert out.kills == 2 and out.journal.acked >= 5


@pytest.mark.req("rel:concurrency")
async def test_many_clients_on_one_workspace_all_land_in_order(tmp_path: Path) -> None:
    out = await concurrency.many_writers(tmp_path, clients=8, writes=12, rng=random.Random(17))
    assert out.problems == []
    assert out.journal.acked == 8 * 12 and len(out.journal.order) == 8


@pytest.mark.req("rel:concurrency", "write:supersede")
async def test_a_supersede_race_keeps_one_linear_history(tmp_path: Path) -> None:
    out = await concurrency.supersede_race(tmp_path, clients=6, steps=8, rng=random.Random(19))
    assert out.problems == []


def test_the_race_check_sees_a_fork() -> None:
    acked = [{"id": "fct_1", "event_id": e, "object": e} for e in ("evt_a", "evt_b", "evt_c")]
    history = [
        {"event_id": "evt_a", "current": False, "valid_from": "1", "valid_to": "2"},
        {"event_id": "evt_b", "current": False, "valid_from": "2", "valid_to": "3"},
        {"event_id": "evt_c", "current": True, "valid_from": "2", "valid_to": None},
    ]
    problems = concurrency.race_problems(acked, history, Path("/nonexistent"))
    assert any("not linear" in p for p in problems)


@pytest.mark.req("rel:load", "engine:idle")
async def test_a_small_load_run_with_sleeping_workspaces(tmp_path: Path) -> None:
    rng = random.Random(23)
    result = await load.run_load(tmp_path, 6, 2, seconds=20, rng=rng, idle_timeout=0.5, active=2)
    assert result.problems == []
    assert result.unintended == 0, result.errors
    assert len(result.latencies) >= 10 and sum(j.acked for j in result.journals.values()) >= 3
    assert result.idle_stops >= 1 and result.cold_starts >= 3  # workspaces slept and woke
    row = result.row()
    assert row["lost"] == "0" and " / " in row["p50 / p95 / p99 ms"]
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.req("gw:503", "gw:spawn")
async def test_a_small_cold_burst_is_ready_after_honouring_retry_after(tmp_path: Path) -> None:
    """Four cold workspaces, one start at a time, a caller's wait shorter than a start: some first
    calls get 503 with Retry-After, and a client that honours it finds its workspace ready."""
    settings = {"embedder": "false", "engine_start_concurrency": "1", "engine_start_timeout": "0.2"}
    result = await cold.burst(tmp_path, 4, settings=settings)
    assert result.errors == {}, result.errors
    assert len(result.attempts) == 4 and len(result.ready_at) == 4
    assert set(result.refusals) == {"engine_start_timeout"} and result.retry_after
    assert min(result.retry_after) >= 1
    row = result.row()
    assert row["never"] == "0" and row["all ready after s"] != "never"
    # one start per workspace (none killed and begun again), and every 503 the client saw counted
    assert row["/metrics: engine starts / crashes / 503s"] == f"4 / 0 / {len(result.retry_after)}"
    shutil.rmtree(tmp_path, ignore_errors=True)
