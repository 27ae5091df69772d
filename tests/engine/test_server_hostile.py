"""Real engine processes on the hostile store (``tests/hostile_store.py``: an alias bomb, deep
nesting, a recursive alias, a 2 MiB frontmatter, a billion laughs in the ledger) (``rel:fuzz``):
the start, a reindex, the doctor and an import each finish within a bounded wait and a bounded
peak memory, name every hostile file, leave each one byte for byte as it was, and find each
note's body. Before the bound, each of these took minutes of CPU and gigabytes of memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests import hostile_store
from tests.engine.support import engine_command, snapshot, socket_client, socket_engine
from tests.engine.test_server_reliability import _until

OFF = ("--embedding-provider", "off")
#: Peak resident memory allowed to an engine process on the hostile store. An engine on an empty
#: store peaks near 100 MiB (Python, SQLite, the MCP SDK); expanding one bomb takes gigabytes.
PEAK_BYTES = 400 * 1024 * 1024
#: Wall time allowed to an offline run (generous: the machine is shared and loaded).
BOUND_S = 90.0


def _call(sock: Path, tool: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with socket_client(sock) as client:
            with anyio.fail_after(60):
                return await client.call_tool(tool, args)

    return anyio.run(go)


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (``VmHWM``), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


#: Runs a command and prints its peak RSS (KiB) as its last stdout line. The measure comes from a
#: small parent because Linux counts, in a child's ``ru_maxrss``, the memory of the process it was
#: forked from (a pytest worker late in the suite holds over a gigabyte).
_MEASURE = (
    "import resource, subprocess, sys; "
    "status = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True); "
    "sys.exit(status if status >= 0 else 128 - status)"
)


def run_measured(*argv: str, timeout: float = BOUND_S) -> tuple[int, int, str]:
    """Run an engine command to its end: (exit status, its own peak RSS in bytes, stderr). It is
    killed, and the test fails, past ``timeout``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURE, *engine_command(*argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"{argv[0]} did not finish within {timeout:.0f} s") from None
    return proc.returncode, int(out.split()[-1]) * 1024, err


def _found(sock: Path, word: str) -> bool:
    found = _call(sock, "get_context", {"query": word}).structured_content
    return any(word in note["text"] for note in found["notes"])


def _check_served(sock: Path, hostile: dict[str, str]) -> None:
    """Every hostile file named by ``memory_status``, every body found (path → word)."""
    status = _until(
        lambda: (s := _call(sock, "memory_status", {}).structured_content)["index"]["state"] == "ready" and s
    )
    named = {p["path"]: p["problem"] for p in status["problems"]}
    for path in hostile:
        assert "frontmatter was not read" in named[path], named
    for word in hostile.values():
        assert _found(sock, word), word


@pytest.mark.req("rel:fuzz", "store:bad-file", "recall:status")
def test_an_engine_starts_on_the_hostile_store_in_bounded_time_and_memory(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    written = hostile_store.write(ws)
    with socket_engine(ws, sock, *OFF) as proc:  # healthy within its bounded wait
        _check_served(sock, {n.path: n.word for n in hostile_store.NOTES})
        status = _call(sock, "memory_status", {}).structured_content
        assert (
            "more than 10,000 values"
            in {p["path"]: p["problem"] for p in status["problems"]}[hostile_store.LEDGER]
        )
        peak = peak_rss(proc.pid)
    assert peak < PEAK_BYTES, f"the engine peaked at {peak / 2**20:.0f} MiB"
    after = snapshot(ws)  # the plain note was archived by the sweep; the kept ones are never rewritten
    assert {p: after[p] for p in written if p != hostile_store.PLAIN_NOTE[0]} == {
        p: b for p, b in written.items() if p != hostile_store.PLAIN_NOTE[0]
    }


@pytest.mark.req("rel:fuzz", "engine:rebuild")
def test_reindex_and_doctor_on_the_hostile_store_are_bounded_and_name_each_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    written = hostile_store.write(ws)
    code, peak, err = run_measured("--reindex", "--dir", str(ws), *OFF)
    assert code == 0, err
    assert peak < PEAK_BYTES, f"the reindex peaked at {peak / 2**20:.0f} MiB"
    code, peak, err = run_measured("--doctor", "--dir", str(ws), *OFF)
    assert code == 1  # the hostile files are problems to report
    assert peak < PEAK_BYTES, f"the doctor peaked at {peak / 2**20:.0f} MiB"
    for path in [n.path for n in hostile_store.NOTES] + [hostile_store.LEDGER]:
        assert f"problem: {path}:" in err, err
    assert "memories missing from" not in err  # the kept notes were indexed by their bodies
    assert snapshot(ws) == written


@pytest.mark.req("rel:fuzz", "life:import")
def test_importing_hostile_markdown_into_a_running_engine_is_bounded(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    upload = hostile_store.markdown_zip()
    with (
        socket_engine(ws, sock, *OFF) as proc,
        httpx.Client(
            transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost", timeout=BOUND_S
        ) as http,
    ):
        reply = http.post("/admin/import", params={"label": "hostile"}, content=upload)
        assert reply.status_code == 200, reply.text
        names = {Path(n.path).name: n for n in hostile_store.NOTES if n.word != "okapi"}
        assert sorted(reply.json()["imported"]) == sorted(f"notes/Imported/hostile/{name}" for name in names)
        assert [(s["path"], "larger than" in s["reason"]) for s in reply.json()["skipped"]] == [
            ("huge.md", True)
        ]
        _check_served(sock, {f"notes/Imported/hostile/{name}": n.word for name, n in names.items()})
        peak = peak_rss(proc.pid)
    assert peak < PEAK_BYTES, f"the engine peaked at {peak / 2**20:.0f} MiB"
    for name, note in names.items():
        assert (ws / "notes" / "Imported" / "hostile" / name).read_text(encoding="utf-8") == note.text
