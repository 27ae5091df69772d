"""``almanac serve``: bind, print the MCP URL and how to connect a client, run uvicorn until stopped.

Everything that can stop a start (a busy port, a data directory that cannot be written, a control
database that is missing its folder or is not one) is checked before anything else starts and
raised as one :class:`~gateway.errors.ConfigError` line; the CLI prints it and exits non-zero."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import uvicorn

from gateway import layout, logs
from gateway.app import create_app
from gateway.cluster.fencing import hold_data_dir
from gateway.errors import DataDirError, PortInUse
from gateway.settings import Settings

SHUTDOWN_GRACE = 5.0


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free port (read it back from the socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY only on sockets that do, and without it every
    # response written in two parts (headers, then body) waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} on {host} is already in use; stop the program using it, or choose "
                "another port with --port (make run PORT=…, or ALMANAC_PORT)"
            ) from None
        if exc.errno == errno.EACCES:
            raise PortInUse(f"not allowed to listen on port {port}; use a port above 1023") from None
        raise PortInUse(f"cannot listen on {host}:{port}: {exc.strerror}; check --host") from None
    sock.listen(2048)
    return sock


def check_data_dir(data_dir: Path, *, control_db: bool = True) -> None:
    """Create the data directory if needed and prove a file can be written in it; refuse one that
    holds workspaces but lost its control database (starting would orphan them silently). With the
    control plane in PostgreSQL (``control_db`` false) there is no such file to lose."""
    if control_db and (data_dir / "workspaces").is_dir() and not layout.control_db(data_dir).exists():
        raise DataDirError(
            f"{data_dir} holds workspaces but no {layout.control_db(data_dir).name}; restore it from a "
            "backup (or move workspaces/ aside to start empty)"
        )
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=data_dir):
            pass
    except OSError as exc:
        raise DataDirError(
            f"cannot write to the data directory {data_dir} ({exc.strerror}); fix its permissions or "
            "choose another with --data-dir (make run DATA_DIR=…, or ALMANAC_DATA_DIR)"
        ) from None


def url_of(host: str, port: int, public_url: str | None) -> str:
    if public_url:
        return public_url.rstrip("/")
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def advertise_with_port(advertise_url: str, port: int) -> str:
    """An advertise URL whose port is ``0`` names the port actually bound (``--port 0``)."""
    parts = urlsplit(advertise_url)
    if parts.port != 0:
        return advertise_url
    host = parts.netloc.rsplit(":", 1)[0]
    return urlunsplit((parts.scheme, f"{host}:{port}", parts.path, parts.query, parts.fragment))


def almanac_command() -> str:
    """How the user can run this CLI: ``almanac`` when that is on PATH, else its full path."""
    here = Path(sys.executable).parent / "almanac"
    found = shutil.which("almanac")
    if found and here.exists() and Path(found).resolve() == here.resolve():
        return "almanac"
    if here.exists():
        try:
            return str(here.relative_to(Path.cwd()))
        except ValueError:
            return str(here)
    return "almanac"


#: How the banner says owners sign up on the site, by the ``signup`` setting.
SIGNUP_LINES = {
    "open": "Sign up in a browser at {base}/signup; then add {base}/mcp to a client, which signs in there.\n",
    "invite": "Sign-up at {base}/signup needs an invite: {command} invite create --data-dir {d}\n",
    "closed": "Sign-up on the site is closed.\n",
}


def banner(base: str, data_dir: str, command: str = "almanac", signup: str = "open") -> str:
    d = shlex.quote(data_dir)
    web = SIGNUP_LINES.get(signup, "").format(base=base, command=command, d=d)
    then = "Or, on this host, " if signup == "open" else ""
    return (
        f"Almanac {version('almanac')} is serving MCP at {base}/mcp\n"
        f"Data: {data_dir}\n"
        f"{web}"
        f"{then or 'To connect a client, '}create an owner and a token once (the token is printed once):\n"
        f"  {command} owner create you@example.com --data-dir {d}\n"
        f"  {command} token create --owner you@example.com --name 'Claude Code' --data-dir {d}\n"
        "then give the client the URL and the token, e.g. for Claude Code:\n"
        f'  claude mcp add --transport http almanac {base}/mcp --header "Authorization: Bearer <token>"\n'
        "Stop with Ctrl-C.\n"
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


def run(settings: Settings, *, clock: Callable[[], float] = time.time) -> None:
    """Serve until stopped. ``clock``: the wall clock the composition root is given
    (:func:`~gateway.app.create_app`)."""
    logs.configure(settings.log_level, settings.log_format)
    check_data_dir(settings.data_dir, control_db=settings.database_url is None)
    held = hold_data_dir(settings.data_dir)  # one `almanac serve` per data directory, for our life
    sock = bind(settings.host, settings.port)
    try:
        if settings.advertise_url is not None:
            advertised = advertise_with_port(settings.advertise_url, sock.getsockname()[1])
            settings = dataclasses.replace(settings, advertise_url=advertised)
        app = create_app(settings, clock=clock)
    except BaseException:
        sock.close()
        os.close(held)
        raise
    port = sock.getsockname()[1]
    sys.stdout.write(
        banner(
            url_of(settings.host, port, settings.public_url),
            str(settings.data_dir),
            almanac_command(),
            settings.signup,
        )
    )
    sys.stdout.flush()
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE),
        # the client address (per-address limits, audit) is the peer's, unless a proxy the
        # operator named forwards it (``X-Forwarded-For``); never uvicorn's own default
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=list(settings.trusted_proxies),
    )
    _Server(config).run(sockets=[sock])
