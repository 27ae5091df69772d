"""The engine's composition root: arguments, the workspace, the MCP server, its transport.

    python -m engine --stdio --dir PATH          one local user, MCP over stdin/stdout
    python -m engine --socket SOCK --dir PATH    streamable HTTP on a Unix socket, for the gateway

Exit status: 0 after a clean stop (SIGTERM/SIGINT finish writes in flight), 2 for bad
arguments, 3 when another engine already serves the directory (see docs/wire.md).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import sys
from pathlib import Path

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.errors import WorkspaceLocked
from engine.memory import Memory
from engine.store.workspace import Workspace
from engine.tools import build_server

EXIT_USAGE = 2
EXIT_LOCKED = 3
VERSION = "0.1.0"

log = logging.getLogger("almanac.engine")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m engine", description="Serve one Almanac workspace over MCP."
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="speak MCP on stdin/stdout (one local user)")
    mode.add_argument("--socket", metavar="PATH", help="serve MCP streamable HTTP on this Unix socket")
    parser.add_argument("--dir", required=True, metavar="PATH", help="the workspace directory")
    parser.add_argument("--embedder-socket", metavar="PATH", help="the host embedder service's socket")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


def _bind(path: str) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a stale socket from an engine that died; we hold the workspace lock
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    return sock


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def socket_app(mcp: MCPServer) -> Starlette:
    app = mcp.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.router.routes.insert(0, Route("/healthz", healthz, methods=["GET"]))
    return app


def serve_socket(mcp: MCPServer, path: str) -> None:
    sock = _bind(path)
    config = uvicorn.Config(
        socket_app(mcp),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=10,
        access_log=False,
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    workspace = Workspace(Path(args.dir).resolve())
    try:
        workspace.open()
    except WorkspaceLocked as exc:
        print(f"almanac engine: {exc.message}", file=sys.stderr)
        return EXIT_LOCKED
    try:
        mcp = build_server(Memory(workspace), version=VERSION)
        if args.stdio:
            anyio.run(mcp.run_stdio_async)
        else:
            serve_socket(mcp, args.socket)
    finally:
        workspace.close()
    return 0
