"""``python -m engine --fork-server`` driven directly over its pipes (gw:spawn, perf:cold-start)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.processes import accepting
from engine.forkserver import Template as Loop
from engine.forkserver import parse
from tests.engine.support import engine_command


def _fds(pid: int) -> list[str]:
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.append(os.readlink(fd))
        except OSError:
            continue
    return found


def _healthy(sock: Path, timeout: float = 60.0) -> None:
    """Poll (bounded) until the engine's socket accepts, then check /healthz."""
    deadline = time.monotonic() + timeout
    while not accepting(sock):
        assert time.monotonic() < deadline, f"no engine on {sock} within {timeout} s"
        time.sleep(0.02)
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=5.0) as http:
        assert http.get("http://localhost/healthz").status_code == 200


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


class Template:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        found: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return found

    def assign(self, root: Path, name: str) -> dict[str, Any]:
        sock, ws, log = root / f"{name}.sock", root / name, root / f"{name}.log"
        self.send((json.dumps({"socket": str(sock), "dir": str(ws), "log": str(log)}) + "\n").encode())
        return self.reply()


@pytest.fixture
def template(tmp_path: Path) -> Iterator[Template]:
    with (tmp_path / "template.log").open("ab") as log:
        proc = subprocess.Popen(
            engine_command("--fork-server", "--exit-with-parent", "--embedding-provider", "off"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
        )
    with proc:  # closes its pipes
        try:
            yield Template(proc)
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.req("gw:spawn", "perf:cold-start")
def test_the_template_forks_engines_that_serve_their_own_workspace_and_reports_their_exits(
    tmp_path: Path, template: Template
) -> None:
    assert template.reply() == {"ready": True}
    me = template.proc.pid
    assert len(os.listdir(f"/proc/{me}/task")) == 1
    held = _fds(me)
    assert not any(t.startswith("socket:") or ".sqlite" in t or ".almanac.lock" in t for t in held), held
    pipes = {t for t in held if t.startswith("pipe:")}  # its stdin and stdout: the gateway's wire
    assert len(pipes) == 2
    engines = []
    for name in ("a", "b"):
        answer = template.assign(tmp_path, name)
        pid = answer["pid"]
        engines.append(pid)
        assert _parent_of(pid) == me
        _healthy(tmp_path / f"{name}.sock")
        fds = _fds(pid)
        assert str(tmp_path / name / ".almanac.lock") in fds  # its own workspace
        assert not pipes & set(fds)  # none of the template's pipes
        assert fds[:3] == ["/dev/null", str(tmp_path / f"{name}.log"), str(tmp_path / f"{name}.log")]
    os.kill(engines[0], signal.SIGTERM)
    assert template.reply() == {"exit": engines[0], "returncode": 0}  # a clean stop
    os.kill(engines[1], signal.SIGKILL)
    assert template.reply() == {"exit": engines[1], "returncode": -signal.SIGKILL}


@pytest.mark.req("gw:spawn")
def test_a_bad_assignment_is_refused_and_the_template_serves_on(tmp_path: Path, template: Template) -> None:
    assert template.reply() == {"ready": True}
    template.send(b"not json\n")
    refused = template.reply()
    assert "bad assignment line" in refused["error"] and "socket, dir, log" in refused["error"]
    template.send(b'{"dir": "x"}\n')
    assert "bad assignment line" in template.reply()["error"]
    engine = template.assign(tmp_path, "c")["pid"]
    _healthy(tmp_path / "c.sock")
    assert template.proc.stdin is not None
    template.proc.stdin.close()  # end of input: the template ends, its engine serves on
    assert template.proc.wait(timeout=30) == 0
    assert Path(f"/proc/{engine}").exists()
    os.kill(engine, signal.SIGTERM)


def test_an_assignment_line_is_parsed_or_refused_saying_what_is_expected() -> None:
    assert parse(b'{"socket": "s", "dir": "d", "log": "l"}').log == "l"
    assert parse(b'{"socket": "s", "dir": "d"}').log is None
    for bad in (b"[]", b"{}", b"nope", b'{"socket": "s"}'):
        with pytest.raises(ValueError, match=r"expected \{socket, dir, log\}"):
            parse(bad)


@pytest.mark.req("gw:spawn")
def test_the_template_refuses_to_fork_while_another_thread_runs() -> None:
    """fork() would copy only the calling thread: the template says so and forks nothing."""
    read, write = os.pipe()
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    try:
        forked = Loop(write).fork(b'{"socket": "s", "dir": "d"}', lambda _: pytest.fail("forked"))
    finally:
        done.set()
        other.join()
    assert forked is False
    reply = json.loads(os.read(read, 4096))
    assert reply["error"].startswith("the fork server runs ") and "it forks only with one" in reply["error"]
    os.close(read)
    os.close(write)
