"""A clean stop's mark: a start after it skips the reconcile, anything that changed brings it back."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest

from engine.index import signature
from engine.index.db import CLEAN_MARK
from engine.index.indexer import INDEX_DIR, INDEX_FILE, Indexer
from engine.store.workspace import Workspace
from tests.engine.index.helpers import CALLER, EMBEDDER, Engine, engine
from tests.engine.support import socket_client, socket_engine


def _meta(root: Path) -> dict[str, str]:
    con = apsw.Connection(str(root / INDEX_DIR / INDEX_FILE))
    try:
        return {str(k): str(v) for k, v in con.execute("SELECT key, value FROM meta").fetchall()}
    finally:
        con.close()


def _stale_row(root: Path, memory: str) -> None:
    """Change a row behind the engine's back (the store untouched): only a reconcile puts it back."""
    con = apsw.Connection(str(root / INDEX_DIR / INDEX_FILE))
    try:
        con.execute("UPDATE chunks SET hash = 'stale' WHERE memory = ?", (memory,))
    finally:
        con.close()


def _hash(root: Path, memory: str) -> str:
    con = apsw.Connection(str(root / INDEX_DIR / INDEX_FILE))
    try:
        return str(con.execute("SELECT hash FROM chunks WHERE memory = ?", (memory,)).fetchall()[0][0])
    finally:
        con.close()


def _text(e: Engine, memory: str) -> str:
    rows = e.indexer.db.db.execute("SELECT text FROM chunks WHERE memory = ?", (memory,)).fetchall()
    return str(rows[0][0])


@pytest.mark.req("store:hand-edits")
def test_a_clean_stop_leaves_a_mark_a_start_takes_it_and_trusts_it_only_for_the_same_store(
    tmp_path: Path,
) -> None:
    with engine(tmp_path) as e:
        kayak = e.memory.remember(CALLER, "The kayak is red.")
        e.memory.remember(CALLER, "The canoe leaks at the stern.")
        e.settle()
    assert CLEAN_MARK in _meta(tmp_path)  # a clean stop, the rows in step: marked

    _stale_row(tmp_path, kayak.id)
    with engine(tmp_path) as e:
        assert CLEAN_MARK not in _meta(tmp_path)  # taken at the start: a crash from here leaves none
        assert e.indexer.progress.state == "ready"
    assert _hash(tmp_path, kayak.id) == "stale"  # the same store: nothing was compared

    path = tmp_path / str(kayak.path)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))  # touched by hand
    with engine(tmp_path):
        pass
    assert _hash(tmp_path, kayak.id) != "stale"  # another store: reconciled, the row put right


@pytest.mark.req("store:hand-edits")
def test_no_mark_after_a_stop_that_is_not_clean_or_with_other_code_or_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with engine(tmp_path) as e:
        kayak = e.memory.remember(CALLER, "The kayak is red.")
        e.settle()

    # an engine that did not stop cleanly (killed): the mark it took is not put back
    ws = Workspace(tmp_path)
    ws.open()
    indexer = Indexer(ws, EMBEDDER, scan_interval_s=None)
    indexer.start(background=False)
    assert indexer.progress.state == "ready"
    indexer.db.close()  # what the process's end does; stop() never ran
    ws.close()
    assert CLEAN_MARK not in _meta(tmp_path)
    _stale_row(tmp_path, kayak.id)
    with engine(tmp_path):
        pass
    assert _hash(tmp_path, kayak.id) != "stale"

    # rows made by other code (or under other settings) are compared again
    _stale_row(tmp_path, kayak.id)
    monkeypatch.setattr("engine.index.indexer._ROW_CODE", "other code")
    with engine(tmp_path):
        pass
    assert _hash(tmp_path, kayak.id) != "stale"

    _stale_row(tmp_path, kayak.id)
    ws = Workspace(tmp_path)
    ws.open()
    indexer = Indexer(ws, EMBEDDER, scan_interval_s=None, max_item_bytes=10_000)
    indexer.start()
    indexer.stop()
    ws.close()
    assert _hash(tmp_path, kayak.id) != "stale"


@pytest.mark.req("store:hand-edits")
def test_a_stop_with_a_hand_edit_not_yet_picked_up_leaves_no_mark(tmp_path: Path) -> None:
    with engine(tmp_path) as e:
        kayak = e.memory.remember(CALLER, "The kayak is red.")
        e.settle()
        path = tmp_path / str(kayak.path)
        path.write_text(path.read_text(encoding="utf-8").replace("red", "turquoise"), encoding="utf-8")
    assert CLEAN_MARK not in _meta(tmp_path)
    with engine(tmp_path) as e:
        assert _text(e, kayak.id) == "The kayak is turquoise."


@pytest.mark.req("store:hand-edits")
def test_an_edit_that_keeps_the_size_and_time_of_a_file_written_just_before_the_stop_is_seen(
    tmp_path: Path,
) -> None:
    """File times can be coarse: an edit right after a stop may keep a file's size and time. The
    files written in the last seconds before a clean stop are in the mark by their contents."""
    with engine(tmp_path) as e:
        kayak = e.memory.remember(CALLER, "The kayak is red.")
        e.settle()
    path = tmp_path / str(kayak.path)
    before = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("red", "tan"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_mtime_ns, path.stat().st_size) == (before.st_mtime_ns, before.st_size)
    with engine(tmp_path) as e:
        assert _text(e, kayak.id) == "The kayak is tan."


def test_the_mark_names_every_file_its_size_and_time_the_code_and_the_settings() -> None:
    sig = {"notes/a.md": (1, 10), "facts/b.md": (2, 20)}
    contents = {"notes/a.md": b"a", "facts/b.md": b"b"}
    stopped = signature.RACY_NS * 10

    def mark(s: dict[str, tuple[int, int]], code: str | None = "code", settings: str = "s") -> str | None:
        return signature.clean_mark(s, code, settings, stopped, contents.__getitem__)

    found = mark(sig)
    assert found is not None and found == mark(dict(reversed(sig.items())))  # order-free
    assert signature.mark_holds(found, sig, "code", "s", contents.__getitem__)
    others = [
        mark({**sig, "notes/a.md": (1, 11)}),
        mark({**sig, "notes/a.md": (3, 10)}),
        mark({"notes/a.md": (1, 10)}),
        mark(sig, "other"),
        mark(sig, "code", "t"),
    ]
    assert len({found, *others}) == 6
    assert not any(
        signature.mark_holds(found, s, "code", "s", contents.__getitem__)
        for s in ({**sig, "notes/a.md": (1, 11)}, {"notes/a.md": (1, 10)})
    )
    assert mark(sig, None) is None  # unknown code: never trusted

    # an old file's contents are not read; one written within RACY_NS of the stop is
    racy = {"notes/a.md": (stopped - signature.RACY_NS + 1, 10)}
    changed = {"notes/a.md": b"x"}
    assert signature.clean_mark(sig, "code", "s", stopped, changed.__getitem__) == found
    assert signature.clean_mark(racy, "code", "s", stopped, changed.__getitem__) != mark(racy)
    assert not signature.mark_holds("garbage", sig, "code", "s", contents.__getitem__)


@pytest.mark.req("perf:cold-start")
def test_the_page_check_is_left_out_after_a_clean_stop_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PRAGMA quick_check`` reads every page (seconds for a large index): an engine opening an
    index a clean stop marked leaves it out; after any other stop it runs."""
    statements: list[str] = []

    def seen(_cursor: object, sql: str, _bindings: object) -> bool:
        statements.append(sql)
        return True

    def traced(con: apsw.Connection) -> None:
        con.exec_trace = seen

    monkeypatch.setattr(apsw, "connection_hooks", [*apsw.connection_hooks, traced])
    with engine(tmp_path) as e:
        e.memory.remember(CALLER, "The kayak is red.")
        e.settle()
    assert any("quick_check" in s for s in statements) is False  # a new index: nothing to check

    statements.clear()
    with engine(tmp_path):
        pass
    assert not any("quick_check" in s for s in statements)  # marked by the clean stop before

    ws = Workspace(tmp_path)
    ws.open()
    unclean = Indexer(ws, EMBEDDER, scan_interval_s=None)
    unclean.start(background=False)
    unclean.db.close()  # the process ended: stop() never ran
    ws.close()
    statements.clear()
    with engine(tmp_path):
        pass
    assert any("quick_check" in s for s in statements)


@pytest.mark.req("perf:cold-start")
def test_an_engine_process_stopped_as_the_gateway_stops_it_leaves_the_mark(tmp_path: Path) -> None:
    """The real engine process: told to stop (SIGTERM, as the gateway's supervisor stops an idle
    engine) once its start-up comparison is done, it leaves the mark; its next start takes it."""
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"

    async def state() -> dict[str, Any]:
        async with socket_client(sock) as client:
            status = (await client.call_tool("memory_status", {})).structured_content
            assert status is not None
            return dict(status["index"])

    async def remember(text: str) -> None:
        async with socket_client(sock) as client:
            assert not (await client.call_tool("remember", {"statement": text})).is_error

    for round in range(2):
        with socket_engine(ws, sock):
            deadline = time.monotonic() + 60
            while anyio.run(state)["state"] != "ready":  # the start-up comparison, in its thread
                assert time.monotonic() < deadline, "the start-up comparison did not finish in 60 s"
                time.sleep(0.05)
            if round == 0:
                anyio.run(remember, "The kayak is red.")
            else:
                assert CLEAN_MARK not in _meta(ws)  # taken by the start
        assert CLEAN_MARK in _meta(ws)


def test_the_signature_lists_the_store_s_markdown_files_as_a_walk_of_the_store_does(tmp_path: Path) -> None:
    """Every ``.md`` file under the store's folders by its relative path, with its time and size;
    hidden files and folders, other folders, linked folders and dangling links left out."""
    for rel in ("notes/2026/01/a.md", "notes/b.md", "notes/.hidden/c.md", "notes/.d.md", "facts/2026-01.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "notes" / "x.txt").write_text("not Markdown")
    (tmp_path / "elsewhere" / "e.md").parent.mkdir()
    (tmp_path / "elsewhere" / "e.md").write_text("outside the store")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "linked").symlink_to(tmp_path / "notes", target_is_directory=True)
    (tmp_path / "logs" / "folder.md").symlink_to(tmp_path / "notes", target_is_directory=True)
    (tmp_path / "logs" / "gone.md").symlink_to(tmp_path / "nowhere.md")
    (tmp_path / "logs" / "b.md").symlink_to(tmp_path / "notes" / "b.md")
    found = signature.store_signature(tmp_path)
    assert sorted(found) == ["facts/2026-01.md", "logs/b.md", "notes/2026/01/a.md", "notes/b.md"]
    st = os.stat(tmp_path / "notes" / "b.md")
    assert found["notes/b.md"] == found["logs/b.md"] == (st.st_mtime_ns, st.st_size)
