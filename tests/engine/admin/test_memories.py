"""The owner's listing (engine/admin/memories.py): pure selection, and the real socket route."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import anyio
import httpx
import pytest

from engine.admin.memories import Query, Row, parse_query, retirement, rows, seen_by, select
from engine.errors import InvalidInput
from engine.memory import Memory
from engine.scope import Caller
from engine.store.workspace import Workspace
from tests.engine.support import socket_client, socket_engine

ME = Caller(connection="Claude Code on laptop")


def row(i: int, **kw: object) -> Row:
    values: dict[str, object] = {
        "id": f"nte_{i:02d}",
        "kind": "note",
        "text": f"note {i}",
        "state": "live",
        "scope": None,
        "source": "Claude",
        "created": f"2026-11-{i:02d}T10:00:00Z",
    }
    values.update(kw)
    return Row(**values)  # type: ignore[arg-type]


def test_newest_first_and_paged() -> None:
    all_rows = [row(i) for i in range(1, 21)]
    page, total = select(all_rows, Query(offset=5, limit=5))
    assert total == 20 and [r.id for r in page] == ["nte_15", "nte_14", "nte_13", "nte_12", "nte_11"]


def test_every_filter() -> None:
    all_rows = [
        row(1, kind="fact", text="Fjord · db: Postgres", scope="project:fjord"),
        row(2, state="retired", source="Cursor"),
        row(3, text="The standup moved to 9:30", state="archived"),
        row(4, kind="log", text="Deployed v2"),
    ]

    def ids(q: Query) -> list[str]:
        return [r.id for r in select(all_rows, q)[0]]

    assert ids(Query(kind="fact")) == ["nte_01"]
    assert ids(Query(state="retired")) == ["nte_02"]
    assert ids(Query(scope="project:fjord")) == ["nte_01"]
    assert ids(Query(source="cursor")) == ["nte_02"]
    assert ids(Query(text="STANDUP")) == ["nte_03"]
    assert ids(Query(text="nte_04")) == ["nte_04"]
    assert ids(Query(since=date(2026, 11, 2), until=date(2026, 11, 3))) == ["nte_03", "nte_02"]


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"kind": "fcat"}, "kind must be one of fact, note, log"),
        ({"state": "dead"}, "state must be one of"),
        ({"since": "yesterday"}, "since must be a date, YYYY-MM-DD"),
        ({"limit": "9999"}, "limit must be a whole number from 1 to 200"),
        ({"limit": "0"}, "limit must be a whole number from 1 to 200"),
        ({"since": "20261101"}, "since must be a date, YYYY-MM-DD"),
        ({"kind": ""}, "kind must be one of"),
        ({"offset": "-1"}, "offset must be a whole number"),
    ],
)
def test_bad_parameters_say_what_to_fix(params: dict[str, str], why: str) -> None:
    with pytest.raises(InvalidInput, match=why):
        parse_query(params)


def test_rows_cover_facts_notes_and_logs_in_every_state(workspace: Workspace, memory: Memory) -> None:
    memory.save_memory(ME, "Fjord", "database", "MySQL")
    memory.save_memory(ME, "Fjord", "database", "Postgres")
    note = memory.remember(ME, "The standup moved to 9:30.", scope="project:fjord")
    memory.remember_note(ME, "Deployed v2 to staging")
    memory.retire(ME, note.id, "wrong")
    found = {r.kind: r for r in rows(workspace)}
    assert found["fact"].text == "Fjord · database: Postgres" and found["fact"].current is True
    assert found["note"].state == "retired" and found["note"].scope == "project:fjord"
    assert found["log"].text == "Deployed v2 to staging" and found["log"].source == ME.connection


def test_the_socket_serves_the_listing(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    with socket_engine(ws, sock):
        http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost", timeout=30
        )
        with http:
            empty = http.get("/admin/memories")
            assert empty.status_code == 200 and empty.json()["total"] == 0

            async def save() -> None:
                async with socket_client(sock) as client:
                    result = await client.call_tool(
                        "remember", {"statement": "x" * 400, "scope": "project:a"}
                    )
                    assert not result.is_error

            anyio.run(save)
            listed = http.get("/admin/memories", params={"scope": "project:a"}).json()
            assert listed["total"] == 1 and len(listed["items"][0]["text"]) == 300  # a preview
            assert listed["facets"]["scopes"] == ["project:a"]
            bad = http.get("/admin/memories", params={"kind": "x"})
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"


@pytest.mark.req("gw:isolation")
def test_a_pinned_connection_lists_its_scope_and_unscoped_memories_only_if_chosen() -> None:
    all_rows = [
        row(1, scope="project:fjord"),
        row(2, scope="project:kelp"),
        row(3),
        row(4, state="deleted", text="deleted"),
    ]
    assert [r.id for r in seen_by(all_rows, "project:fjord", True)] == ["nte_01", "nte_03"]
    assert [r.id for r in seen_by(all_rows, "project:fjord")] == ["nte_01"]
    assert seen_by(all_rows, None) == all_rows


@pytest.mark.req("life:retire")
def test_a_retired_memory_says_when_by_whom_and_why(workspace: Workspace, memory: Memory) -> None:
    """The retire event's reason stays with the memory (after a reload from the ledger too) until
    it is restored; a log entry and a fact keep theirs the same way."""
    note = memory.remember(ME, "Deploys are frozen.")
    entry = memory.remember_note(ME, "Froze deploys")
    fact = memory.save_memory(ME, "Fjord", "database", "MySQL")
    memory.retire(ME, note.id, "the audit ended")
    memory.retire(ME, entry.id)
    memory.retire(ME, fact.id, "wrong database")
    for ws in (workspace, reloaded(workspace)):
        said = retirement(ws, note.id)
        assert said is not None and said["reason"] == "the audit ended" and said["by"] == ME.connection
        assert str(said["at"]).endswith("Z")
        quiet = retirement(ws, entry.id)
        assert quiet is not None and quiet["reason"] is None and quiet["by"] == ME.connection
        assert (retirement(ws, fact.id) or {})["reason"] == "wrong database"
    memory.restore(ME, note.id)
    assert retirement(workspace, note.id) is None and retirement(reloaded(workspace), note.id) is None


def reloaded(ws: Workspace) -> Workspace:
    """The same store read again from its files (as a restarted engine reads it)."""
    ws.load()
    return ws
