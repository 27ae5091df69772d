"""A loopback TCP relay for tools that only speak HTTP over TCP (the MCP conformance suite).

It listens on 127.0.0.1, port 0, and forwards each connection to a Unix socket (an engine) or a
TCP address (the gateway), adding fixed headers to every request head: the bearer token a client
would send. Request bodies must carry ``Content-Length`` (chunked uploads are refused loudly).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

Target = Path | tuple[str, int]


async def _open(target: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if isinstance(target, Path):
        return await asyncio.open_unix_connection(str(target))
    return await asyncio.open_connection(*target)


def _with_headers(head: bytes, extra: bytes) -> tuple[bytes, int]:
    lines = head.split(b"\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        if name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            raise ValueError("the relay cannot forward a chunked request body")
    start = head.index(b"\r\n") + 2
    return head[:start] + extra + head[start:], length


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _serve(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: Target, extra: bytes
) -> None:
    try:
        up_reader, up_writer = await _open(target)
    except OSError:
        writer.close()
        return
    back = asyncio.create_task(_pipe(up_reader, writer))
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            head, length = _with_headers(head, extra)
            up_writer.write(head + (await reader.readexactly(length) if length else b""))
            await up_writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
        pass
    finally:
        back.cancel()
        with contextlib.suppress(Exception):
            up_writer.close()
        with contextlib.suppress(Exception):
            writer.close()
        with contextlib.suppress(BaseException):
            await back


@contextlib.contextmanager
def relay(target: Target, headers: dict[str, str] | None = None) -> Iterator[str]:
    """Run a relay in a thread; yields its base URL (``http://127.0.0.1:PORT``)."""
    extra = b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in (headers or {}).items())
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []
    stop = asyncio.Event()

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: _serve(r, w, target, extra), "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        async with server:
            await stop.wait()
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(timeout=10):
        raise TimeoutError("the relay did not start")
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()
