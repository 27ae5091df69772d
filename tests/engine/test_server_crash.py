"""A real engine killed with SIGKILL in the middle of a burst of concurrent writes: every write it
acknowledged is in the Markdown store after a restart, whole, nothing half-written stops the
store from loading, and the index catches up to all of it (``store:durable``, ``rel:load``)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.engine.support import socket_client, socket_engine

OFF = ("--embedding-provider", "off")
WRITERS = 6
#: Acknowledged writes to wait for before the kill (the writers go on writing meanwhile).
ACKED_BEFORE_KILL = 45


def _until(check: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)  # poll interval of a bounded wait


def _metrics(sock: Path) -> dict[str, Any]:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30.0) as http:
        reply = http.get("http://localhost/metrics")
        assert reply.status_code == 200
        data: dict[str, Any] = reply.json()
        return data


def _write(n: int, i: int) -> tuple[str, dict[str, Any], str]:
    """The ``i``-th call of writer ``n``: a note, a fact or a day-log entry, each with its own word."""
    word = f"crashword{n}q{i}"
    if i % 3 == 0:
        return "remember", {"statement": f"The {word} note survives a crash."}, word
    if i % 3 == 1:
        return (
            "remember",
            {"statement": f"{word} is up.", "subject": word, "predicate": "state", "object": "up"},
            word,
        )
    return "remember_note", {"text": f"Deployed {word} today."}, word


def _writer(sock: Path, n: int, acked: list[tuple[str, str, str]], refused: list[str]) -> None:
    """Write until the engine is gone; record each acknowledged write as (id, kind, word)."""

    async def go() -> None:
        async with socket_client(sock) as client:
            i = 0
            while True:
                tool, args, word = _write(n, i)
                try:
                    with anyio.fail_after(60):
                        result = await client.call_tool(tool, args)
                except Exception:
                    return  # the engine died: this call was never acknowledged
                if result.is_error:
                    refused.append(str(result.content))
                    return
                receipt = result.structured_content
                acked.append((receipt["id"], receipt["kind"], word))
                i += 1

    try:
        anyio.run(go)
    except Exception:  # the connection's own teardown after the kill
        return


@pytest.mark.req("store:durable", "rel:load")
def test_every_acknowledged_write_survives_a_kill_9_in_the_middle_of_a_burst(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    acked: list[tuple[str, str, str]] = []
    refused: list[str] = []
    with socket_engine(ws, sock, *OFF) as proc:
        writers = [threading.Thread(target=_writer, args=(sock, n, acked, refused)) for n in range(WRITERS)]
        for thread in writers:
            thread.start()
        _until(lambda: len(acked) >= ACKED_BEFORE_KILL or bool(refused))
        counted = len(acked)
        metrics = _metrics(sock)["commits"]
        os.kill(proc.pid, signal.SIGKILL)  # mid-burst: every writer has a call in flight or about to
        proc.wait(30)
        for thread in writers:
            thread.join(120)
    assert refused == []
    assert metrics["writes"] >= counted and 1 <= metrics["batches"] <= metrics["writes"]
    assert metrics["fsyncs"] >= metrics["batches"]
    survived = list(acked)
    assert len(survived) >= ACKED_BEFORE_KILL

    # in the Markdown store, as files a person can read
    store = "".join(p.read_text(encoding="utf-8") for p in ws.rglob("*.md") if ".index" not in p.parts)
    missing = [memory for memory, _, _ in survived if memory not in store]
    assert missing == [], f"acknowledged but not in the store: {missing}"

    async def after_restart() -> None:
        async with socket_client(sock) as client:
            with anyio.fail_after(180):
                while True:
                    status = (await client.call_tool("memory_status", {})).structured_content
                    if status["index"]["state"] == "ready":
                        break
                    await anyio.sleep(0.05)  # poll interval of a bounded wait
                assert status["problems"] == [] and status["unreadable_files"] == 0
                for memory, kind, word in survived:
                    found = await client.call_tool("retrieve_memory", {"id": memory})
                    assert not found.is_error, (memory, found.content)
                    reply = found.structured_content
                    assert [x["id"] for x in reply["facts" if kind == "fact" else "notes"]][:1] == [memory]
                    context = (await client.call_tool("get_context", {"query": word})).structured_content
                    ids = {x["id"] for x in context["facts"] + context["notes"]}
                    assert memory in ids, (memory, word, context)

    with socket_engine(ws, sock, *OFF):
        anyio.run(after_restart)
