"""The engine process under damage and at a stop: it answers before its index has caught
up, names what it cannot read, and a call stuck in a hung embedder does not hold a SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.embed.remote import RemoteEmbedder
from tests.engine.support import snapshot, socket_client, socket_engine

OFF = ("--embedding-provider", "off")


def _call(sock: Path, tool: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with socket_client(sock) as client:
            with anyio.fail_after(60):
                return await client.call_tool(tool, args)

    return anyio.run(go)


def _status(sock: Path) -> dict[str, Any]:
    result = _call(sock, "memory_status", {})
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    return data


def _until(check: Any, timeout_s: float = 60.0) -> Any:
    """Poll ``check()`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)  # poll interval of a bounded wait


@pytest.mark.req("store:bad-file")
@pytest.mark.req("recall:status")
def test_a_50_mb_note_and_damaged_files_neither_block_the_start_nor_the_tools(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    dropped = ws / "notes" / "dropped"
    dropped.mkdir(parents=True)
    (dropped / "huge.md").write_text("zebra " * 9_000_000)  # 54 MB, no sentence or paragraph breaks
    (dropped / "random.md").write_bytes(os.urandom(65536))
    (dropped / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (dropped / "frontmatter.md").write_text("---\nid: [unclosed\n---\nbody\n")
    (dropped / "fine.md").write_text("The zebra herd crossed at dawn.\n")
    (ws / "facts").mkdir()
    (ws / "facts" / "2026-02.md").write_text("## evt_garbage store\n\n```yaml\n: [\n```\n")
    with socket_engine(ws, sock, *OFF):  # healthy within its bounded wait (60 s; minutes before the fix)
        status = _until(lambda: (s := _status(sock))["index"]["state"] == "ready" and s)
        named = {p["path"] for p in status["problems"]}
        assert named == {
            "notes/dropped/random.md",
            "notes/dropped/latin1.md",
            "notes/dropped/frontmatter.md",
            "facts/2026-02.md",
        }
        assert status["unreadable_files"] == 4
        assert [(n["path"], n["bytes"]) for n in status["not_indexed"]] == [
            ("notes/dropped/huge.md", 54_000_000)
        ]
        assert not any(str(tmp_path) in p["path"] or p["path"].startswith("/") for p in status["problems"])
        found = _call(sock, "get_context", {"query": "zebra herd"}).structured_content
        assert [n["text"] for n in found["notes"]] == ["The zebra herd crossed at dawn."]
        saved = _call(sock, "remember", {"statement": "Writing still works with a damaged store."})
        assert not saved.is_error
        again = _call(sock, "get_context", {"query": "damaged store"}).structured_content
        assert again["notes"][0]["id"] == saved.structured_content["id"]


class Relay:
    """A transparent Unix-socket relay in front of the real embedder service that can be frozen:
    requests that arrive then are held (the engine sees a hung embedder)."""

    def __init__(self, listen: Path, target: Path) -> None:
        self.target = target
        self.frozen = threading.Event()
        self.arrived = threading.Event()
        self.closing = threading.Event()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(listen))
        self.server.listen(16)
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(str(self.target))
            self.conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, request: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if request and self.frozen.is_set():
                    self.arrived.set()
                    self.closing.wait()  # held until the test ends
                    return
                dst.sendall(data)

    def close(self) -> None:
        self.closing.set()
        for conn in [self.server, *self.conns]:
            conn.close()


@contextlib.contextmanager
def embedder_service(folder: Path) -> Iterator[Path]:
    sock = folder / "embed.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.embed", "--socket", str(sock), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with RemoteEmbedder(sock, timeout_s=1) as remote:
            _until(lambda: proc.poll() is None and remote.healthy(), 60)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.req("store:durable")
def test_sigterm_exits_promptly_while_a_call_is_stuck_in_a_hung_embedder(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="alm-", dir="/tmp") as short:
        folder = Path(short)
        ws, sock = tmp_path / "ws", folder / "e.sock"
        with embedder_service(folder) as service:
            relay = Relay(folder / "relay.sock", service)
            try:
                with socket_engine(ws, sock, "--embedder-socket", str(folder / "relay.sock")) as proc:
                    saved = _call(sock, "remember", {"statement": "The heron nests by the north pier."})
                    assert not saved.is_error
                    _until(
                        lambda: (
                            (s := _status(sock))["embedding"]["state"] == "ready"
                            and s["index"]["waiting_for_embeddings"] == 0
                        )
                    )
                    relay.frozen.set()
                    before = snapshot(ws)
                    elapsed, code = anyio.run(_stop_during_a_stuck_call, sock, proc, relay)
            finally:
                relay.close()
    assert code == 0
    assert elapsed < 15, f"the engine took {elapsed:.1f} s to stop"  # held by the call: 20 s or more
    assert snapshot(ws) == before  # nothing half written; the acknowledged note is there
    assert any(saved.structured_content["id"] in name for name in before)


async def _stop_during_a_stuck_call(
    sock: Path, proc: subprocess.Popen[bytes], relay: Relay
) -> tuple[float, int]:
    async def stuck() -> None:
        with contextlib.suppress(Exception):
            async with socket_client(sock) as client:
                await client.call_tool("get_context", {"query": "where does the heron nest?"})

    async with anyio.create_task_group() as tg:
        tg.start_soon(stuck)
        assert await anyio.to_thread.run_sync(relay.arrived.wait, 60), "the call never reached the embedder"
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = await anyio.to_thread.run_sync(lambda: proc.wait(timeout=60))
        elapsed = time.monotonic() - started
        tg.cancel_scope.cancel()
    return elapsed, code


LEDGER_BLOCK = """## {eid} store

```yaml
time: '2026-02-0{day}T10:00:00.000000Z'
memory: {fid}
subject: {subject}
predicate: database
object: {obj}
```

"""


@pytest.mark.req("store:bad-file")
@pytest.mark.req("store:torn-tail")
def test_a_hand_damaged_store_starts_answers_names_its_bad_files_and_keeps_working(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    (ws / "facts").mkdir(parents=True)
    good = [
        LEDGER_BLOCK.format(
            eid=f"evt_01M8N16DCB2YF0D3N6WQF1NBY{i}", day=i, fid=f"fct_{i:020d}", subject=f"S{i}", obj=f"O{i}"
        )
        for i in (1, 2)
    ]
    garbage = "## evt_01M8N16DCB2YF0D3N6WQF1NBZ0 store\n\n```yaml\nmemory: [unclosed\n```\n\n"
    torn = "## evt_01M8N16DCB2YF0D3N6WQF1NBZ1 store\n\n```yaml\ntime: '2026-02-03T1"
    (ws / "facts" / "2026-02.md").write_text("# Facts ledger\n\n" + good[0] + garbage + good[1] + torn)
    day = ws / "logs" / "2026" / "02" / "03.md"
    day.parent.mkdir(parents=True)
    day.write_text(
        "# Log — 2026-02-03\n\n- 2026-02-03T10:00:00.000000Z log_01M8N16DE81CCW7TFCR8CMS2TE\n  kept entry\n\n"
        "stray line outside any entry\n\n- not a header at all\n  its body\n\n"
        "- 2026-02-03T11:00:00.000000Z log_01M8N16DE81CCW7TFCR8CMS2TF {not json\n  bad metadata\n\n"
    )
    (ws / "notes").mkdir()
    (ws / "notes" / "unclosed.md").write_text("---\nid: nte_x\ntags: [a\nbody without an end\n")
    (ws / "notes" / "tags.md").write_text("---\ntags: 7\n---\nbody\n")
    (ws / "notes" / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    for attempt in range(2):  # the damage survives a restart, and so does what was written since
        with socket_engine(ws, sock, *OFF):
            status = _until(lambda: (s := _status(sock))["index"]["state"] == "ready" and s)
            assert {p["path"] for p in status["problems"]} == {
                "facts/2026-02.md",
                "logs/2026/02/03.md",
                "notes/unclosed.md",
                "notes/tags.md",
                "notes/binary.md",
            }
            facts = _call(sock, "retrieve_memory", {"predicate": "database"}).structured_content["facts"]
            expected = {("S1", "O1"), ("S2", "O2")} | ({("S3", "O3")} if attempt else set())
            assert {(f["subject"], f["object"]) for f in facts} == expected
            entry = _call(sock, "retrieve_memory", {"id": "log_01M8N16DE81CCW7TFCR8CMS2TE"})
            assert entry.structured_content["notes"][0]["text"] == "kept entry"
            if not attempt:
                saved = _call(sock, "save_memory", {"subject": "S3", "predicate": "database", "object": "O3"})
                assert not saved.is_error
                note = _call(sock, "remember", {"statement": "written beside the damage"})
                assert not note.is_error
            found = _call(sock, "get_context", {"query": "written beside the damage"}).structured_content
            assert found["notes"] and found["notes"][0]["text"] == "written beside the damage"
