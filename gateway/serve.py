"""``almanac serve``: bind, print the MCP URL and how to get a token, run uvicorn until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Iterator

import uvicorn

from gateway import logs
from gateway.app import create_app
from gateway.settings import Settings

SHUTDOWN_GRACE = 5.0


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free port (read it back from the socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY only on sockets that do, and without it every
    # response written in two parts (headers, then body) waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def url_of(host: str, port: int, public_url: str | None) -> str:
    if public_url:
        return public_url.rstrip("/")
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def banner(base: str, data_dir: str) -> str:
    return (
        f"Almanac is serving MCP at {base}/mcp\n"
        f"Data: {data_dir}\n"
        "To connect a client, create an owner and a token (the token is printed once):\n"
        f"  almanac owner create you@example.com --data-dir {data_dir}\n"
        f"  almanac token create --owner you@example.com --name 'my laptop' --data-dir {data_dir}\n"
        f"then point the client at {base}/mcp with the header 'Authorization: Bearer <token>'.\n"
    )


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT once its graceful shutdown is done, so the process would
    die of the signal (status -15). Here a signal asks for the same graceful shutdown (the
    lifespan stops every engine) and ``almanac serve`` then exits 0; a second signal forces it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop)
        try:
            yield
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    def _stop(self) -> None:
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True


def run(settings: Settings) -> None:
    logs.configure(settings.log_level, settings.log_format)
    app = create_app(settings)
    sock = bind(settings.host, settings.port)
    port = sock.getsockname()[1]
    sys.stdout.write(
        banner(url_of(settings.host, port, settings.public_url), str(settings.data_dir.resolve()))
    )
    sys.stdout.flush()
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE),
    )
    _Server(config).run(sockets=[sock])
