"""A real uvicorn server on 127.0.0.1, port 0, in a thread: for fake remote services that tests and
subprocesses reach over HTTP (the fake Vertex endpoint, the fake chat model)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp


@contextmanager
def serving_in_thread(app: ASGIApp) -> Iterator[int]:
    """Serve ``app`` until the block ends; yields the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from here on, so no wait for startup is needed
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", ws="none", lifespan="off", timeout_graceful_shutdown=2)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
