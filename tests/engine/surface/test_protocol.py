"""The engine socket's HTTP/1.1 protocol (engine:surface, perf:gateway): ``engine.surface.protocol``.

A plain tool call is answered in uvicorn's protocol, without the ASGI app, in one write. Two real
engines over copies of one workspace — one as in production, one with ``--sdk-replies`` (plain
uvicorn, every request through the app) — get the same raw bytes on a Unix socket, including the
framings the protocol leaves to the app (pipelined requests, ``Expect: 100-continue``,
``Connection: close``, HTTP/1.0, a body past uvicorn's high-water mark); what comes back must be
the same bytes, the ``date`` header and minted ids and times masked. In-process: which requests
:meth:`engine.surface.replies.Replies.at_once` answers (so the comparison is not vacuous).
"""

from __future__ import annotations

import fcntl
import inspect
import re
import shutil
import socket
import struct
import termios
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from engine.server import socket_app
from engine.surface.replies import Replies
from engine.tools import Served, build_server
from tests.engine.support import socket_engine
from tests.engine.surface.test_lean_contract import _MINTED, body_of, call, client, headers_for, message

BIG_FACTS = 80
UNREAD = 100_000
_DATE = re.compile(rb"\r\ndate: [^\r]*\r\n")
_DONE = re.compile(rb"(?s)HTTP/1\.[01] (\d{3}).*?\r\n\r\n")


def raw_request(sent: Any, *, tail: bytes = b"", **extra: str) -> tuple[bytes, bytes]:
    """The request's head (``tail`` added before its blank line) and body, as bytes."""
    body = body_of(sent)
    headers = {"host": "localhost", "content-length": str(len(body)), **headers_for(sent, **extra)}
    head = b"POST /mcp HTTP/1.1\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items())
    return head + tail + b"\r\n", body


def replies_in(data: bytes) -> int:
    """How many complete replies (heads with a content-length, and their bodies) ``data`` holds."""
    count, at = 0, 0
    while (head := _DONE.search(data, at)) is not None:
        length = re.search(rb"content-length: (\d+)", head.group(0))
        end = head.end() + (int(length.group(1)) if length else 0)
        if head.group(1) == b"100":
            at = head.end()
            continue
        if end > len(data):
            break
        count, at = count + 1, end
    return count


def socket_buffer() -> int:
    """What a Unix socket holds unread by default (its sender's buffer)."""
    return int(Path("/proc/sys/net/core/wmem_default").read_text())


def unread(sock: socket.socket) -> int:
    """How many bytes have come in on ``sock`` and wait to be read."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0])


def exchange(
    sock_path: Path, chunks: list[bytes], replies: int, timeout: float = 30.0, unread_first: int = 0
) -> bytes:
    """Send ``chunks`` on one connection (a chunk of b"" waits for a ``100 Continue`` first); read
    (once ``unread_first`` bytes wait unread, if given) until ``replies`` replies are in or the
    engine closes; the bytes with dates and minted masked."""
    deadline = time.monotonic() + timeout
    data = b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(sock_path))
        for chunk in chunks:
            if chunk == b"":
                while b"100 Continue" not in data and time.monotonic() < deadline:
                    data += sock.recv(65536)
                continue
            sock.sendall(chunk)
        while unread(sock) < unread_first and time.monotonic() < deadline:
            time.sleep(0.01)  # until the engine has filled what the socket holds unread
        while replies_in(data) < replies and time.monotonic() < deadline:
            more = sock.recv(65536)
            if not more:
                break
            data += more
    return _MINTED.sub(lambda m: b"#" * len(m.group()), _DATE.sub(b"\r\ndate: #\r\n", data))


@pytest.mark.req("engine:surface", "perf:gateway")
def test_framings_answer_the_same_bytes_as_the_app(tmp_path: Path) -> None:
    seed, seed_sock = tmp_path / "seed", tmp_path / "seed.sock"
    off = ("--embedding-provider", "off")
    with socket_engine(seed, seed_sock, *off), client(seed_sock) as http:
        for i in range(BIG_FACTS):  # one subject whose facts make a reply past a socket's buffer
            sent = call(
                "save_memory",
                {"subject": "kelp", "predicate": f"part {i}", "object": f"v{i}", "statement": "x" * 3990},
            )
            assert http.post("/mcp", content=body_of(sent), headers=headers_for(sent)).status_code == 200
    shutil.copytree(seed, tmp_path / "lean")
    shutil.copytree(seed, tmp_path / "sdk")
    first = raw_request(call("remember", {"statement": "Ada owns the fjord deploy"}, 1))
    second = raw_request(call("get_context", {"query": "fjord deploy"}, 2))
    status = raw_request(call("retrieve_memory", {"subject": "fjord"}, 3))
    closing = raw_request(call("retrieve_memory", {"subject": "fjord"}, 4), tail=b"connection: close\r\n")
    waiting = raw_request(call("retrieve_memory", {"subject": "fjord"}, 5), tail=b"expect: 100-continue\r\n")
    large = raw_request(call("retrieve_memory", {"subject": "fjord " + "x" * 70_000}, 6))
    old_head, old_body = raw_request(call("retrieve_memory", {"subject": "fjord"}, 7))
    big = raw_request(call("retrieve_memory", {"subject": "kelp"}, 8))
    cases: list[tuple[str, list[bytes], int]] = [
        ("one plain call", [b"".join(first)], 1),
        ("two pipelined in one write", [b"".join(second) + b"".join(status)], 2),
        ("the head, then the body", [second[0], second[1]], 1),
        ("the body in two pieces", [status[0] + status[1][:10], status[1][10:]], 1),
        ("Connection: close", [b"".join(closing)], 1),
        ("Expect: 100-continue", [waiting[0], b"", waiting[1]], 1),
        ("a body past the high-water mark", [b"".join(large)], 1),
        ("HTTP/1.0", [old_head.replace(b"HTTP/1.1", b"HTTP/1.0", 1) + old_body], 1),
    ]
    with (
        socket_engine(tmp_path / "lean", tmp_path / "lean.sock", *off),
        socket_engine(tmp_path / "sdk", tmp_path / "sdk.sock", *off, "--sdk-replies"),
    ):
        for what, chunks, replies in cases:
            ours = exchange(tmp_path / "lean.sock", chunks, replies)
            theirs = exchange(tmp_path / "sdk.sock", chunks, replies)
            assert replies_in(ours) == replies, (what, ours)
            assert ours == theirs, what
        # A reply larger than the socket holds, read only once the socket is full: the tool thread
        # writes what fits, the loop the rest; the call pipelined behind it finds bytes still
        # waiting to go out (the loop writes its reply after them).
        chunks = [b"".join(big) + b"".join(status)]
        ours = exchange(tmp_path / "lean.sock", chunks, 2, unread_first=UNREAD)
        theirs = exchange(tmp_path / "sdk.sock", chunks, 2, unread_first=UNREAD)
        assert replies_in(ours) == 2 and len(ours) > 2 * socket_buffer(), len(ours)
        assert ours == theirs
        # a caller that leaves with its request half sent: the engine carries on
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(tmp_path / "lean.sock"))
            sock.sendall(first[0] + first[1][:5])
        assert replies_in(exchange(tmp_path / "lean.sock", [b"".join(status)], 1)) == 1


@pytest.mark.anyio
async def test_plain_tool_calls_are_answered_in_the_protocol() -> None:
    """``Replies.at_once`` answers a plain call of an engine tool (here refused: no workspace yet),
    and nothing else: those go to the app, unrun."""
    replies = socket_app(build_server(Served())).state.replies
    assert isinstance(replies, Replies)

    def scope(sent: Any, **extra: str) -> dict[str, Any]:
        headers = {
            "host": "localhost",
            "content-length": str(len(body_of(sent))),
            **headers_for(sent, **extra),
        }
        return {"type": "http", "method": "POST", "path": "/mcp", "headers": [
            (k.encode(), v.encode()) for k, v in headers.items()
        ]}  # fmt: skip

    plain = call("remember", {"statement": "x"})
    job = await replies.at_once(scope(plain), body_of(plain))
    assert job is not None
    answered = await anyio.to_thread.run_sync(job)  # the whole call, on a thread of its own
    assert answered[0] == 200 and b'"isError":true' in answered[1]
    for what, sent, extra in [
        ("tools/list", message("tools/list", {}), {}),
        ("an unknown tool", call("forget_everything", {}), {}),
        ("bad arguments", call("remember", {"statement": 5}), {}),
        ("a foreign Host", plain, {"host": "evil.example"}),
        ("progress asked for", {**plain, "params": {**plain["params"], "_meta": {"progressToken": 1}}}, {}),
    ]:
        assert await replies.at_once(scope(sent, **extra), body_of(sent)) is None, what


def test_the_uvicorn_hooks_it_overrides_are_still_called() -> None:
    """``SocketProtocol`` overrides uvicorn's ``_start_asgi_task`` (private): if a uvicorn release
    stopped calling it, every request would quietly take the app's path (same bytes, more work)."""
    assert "self._start_asgi_task(" in inspect.getsource(HttpToolsProtocol.on_headers_complete)
    assert "self._start_asgi_task(" in inspect.getsource(HttpToolsProtocol.on_response_complete)
    assert "self.cycle.more_body = False" in inspect.getsource(HttpToolsProtocol.on_message_complete)
