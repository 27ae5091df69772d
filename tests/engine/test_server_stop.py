"""An engine stopped while writes and the indexing they cause are under way stops quietly
(engine:surface): no traceback on its stderr, exit status 0, every acknowledged write in the store.
(The round a stop interrupts exactly at the lock: ``tests/engine/index/test_stop.py``.)"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from tests.engine.support import engine_command, wait_healthy
from tests.engine.surface.test_lean_contract import call, headers_for

WRITERS = 4


def _write_until_refused(sock: Path, writer: int, acknowledged: list[str], started: threading.Event) -> None:
    """Remember one memory after another until the engine stops answering."""
    transport = httpx.HTTPTransport(uds=str(sock))
    with httpx.Client(transport=transport, base_url="http://localhost", timeout=30) as http:
        for n in range(10_000):
            statement = f"writer {writer} note {n}: the kelp {n % 7} pipeline ran on shift {n % 5}"
            sent = call("remember", {"statement": statement, "tags": [f"w{writer}"]})
            try:
                reply = http.post("/mcp", content=json.dumps(sent), headers=headers_for(sent))
            except httpx.TransportError:
                return
            if reply.status_code != 200 or reply.json()["result"].get("isError"):
                return
            acknowledged.append(statement)
            if n == 20:
                started.set()


@pytest.mark.req("engine:surface")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # httpx, on a refused socket
def test_a_stop_with_indexing_in_flight_leaves_no_traceback(tmp_path: Path) -> None:
    ws, sock, stderr_path = tmp_path / "ws", tmp_path / "e.sock", tmp_path / "stderr"
    with stderr_path.open("wb") as stderr:
        argv = engine_command("--socket", str(sock), "--dir", str(ws), "--embedding-provider", "off")
        proc = subprocess.Popen(argv, stderr=stderr)
    try:
        wait_healthy(sock, proc)
        acknowledged: list[str] = []
        started = [threading.Event() for _ in range(WRITERS)]
        writers = [
            threading.Thread(target=_write_until_refused, args=(sock, w, acknowledged, started[w]))
            for w in range(WRITERS)
        ]
        for thread in writers:
            thread.start()
        for event in started:
            assert event.wait(60), "the writers did not get going"
        proc.send_signal(signal.SIGTERM)  # writes and the indexing they cause still under way
        code = proc.wait(timeout=60)
        for thread in writers:
            thread.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = stderr_path.read_text(errors="replace")
    assert "Traceback" not in err, err[-4000:]
    assert code == 0, err[-2000:]
    store = "".join(p.read_text() for p in (ws / "notes").rglob("*.md"))
    assert all(statement in store for statement in acknowledged)
