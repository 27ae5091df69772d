"""The engine's composition root: arguments, the workspace, the MCP server, its transport.

    python -m engine --stdio --dir PATH          one local user, MCP over stdin/stdout
    python -m engine --socket SOCK --dir PATH    streamable HTTP on a Unix socket, for the gateway
    python -m engine --reindex --dir PATH        delete and rebuild the workspace's index, then exit
    python -m engine --doctor --dir PATH         check the workspace's index against its store
    python -m engine --export ZIP --dir PATH     write the store to a new zip (with a manifest)
    python -m engine --import SRC [--label L] --dir PATH
                                                 an export zip into an empty workspace, or a folder
                                                 or zip of Markdown into notes/Imported/<label>/

The offline modes (``--reindex``, ``--doctor``, ``--export``, ``--import``) take the workspace's
lock (exit 3 while an engine serves it) and refuse a path that is not a workspace unless
``--create``; ``~`` is expanded in every path (a JSON client config has no shell to do it).

Exit status: 0 after a clean stop (SIGTERM/SIGINT finish writes in flight), 1 when the doctor
finds problems, 2 for bad arguments (or a path that is not a workspace), 3 when another engine
already serves the directory (see docs/wire.md).

The socket is bound and answering before the index has caught up with the store (that runs in
the background; ``memory_status`` shows how far it is). A stop is bounded: requests get
:data:`GRACE_S` to finish, a write in flight :data:`WRITE_GRACE_S` more; a read stuck past that
(a hung embedder, say) is abandoned and the process exits anyway.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine import admin, forkserver, maintenance
from engine import settings as engine_settings
from engine.ageing.lifecycle import Lifecycle
from engine.cores import one_blas_thread
from engine.embed import Embedder, make_embedder
from engine.errors import BadImport, NotAWorkspace, WorkspaceLocked
from engine.index.indexer import MAX_ITEM_BYTES, Indexer
from engine.lifeline import watch_parent, watch_pidfd
from engine.memory import Memory
from engine.recall.context import Recall, RecallSettings
from engine.settings import PROVIDERS, EngineSettings
from engine.store.model import utc_now
from engine.store.workspace import Workspace
from engine.surface import sdk
from engine.surface.direct import Direct
from engine.surface.lean import Lean
from engine.surface.notify import TOOL_THREADS
from engine.surface.protocol import protocol_for
from engine.surface.replies import Replies
from engine.tools import Served, build_server
from engine.transfer import archive, limits, markdown

EXIT_USAGE = 2
EXIT_LOCKED = 3
# How long an idle connection on the socket is kept open. Only the gateway connects, and it drops
# its own idle connections much sooner (docs/wire.md), so the engine never closes a connection
# the gateway is about to reuse ("Server disconnected without sending a response").
KEEP_ALIVE_SECONDS = 300
VERSION = "0.1.0"
#: After SIGTERM: how long requests in flight may take to finish before they are cancelled.
GRACE_S = 4
#: Then: how long a write still running in a worker thread may take to reach the disk.
WRITE_GRACE_S = 4.0

log = logging.getLogger("almanac.engine")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m engine", description="Serve one Almanac workspace over MCP."
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="speak MCP on stdin/stdout (one local user)")
    mode.add_argument("--socket", metavar="PATH", help="serve MCP streamable HTTP on this Unix socket")
    mode.add_argument("--reindex", action="store_true", help="rebuild the index from the store and exit")
    mode.add_argument("--doctor", action="store_true", help="check the index against the store and exit")
    mode.add_argument(
        "--export", metavar="ZIP", help="write the workspace's store to a new zip file and exit"
    )
    mode.add_argument(
        "--import",
        dest="import_source",
        metavar="SOURCE",
        help="import a folder or zip: an Almanac export (into an empty workspace), or Markdown (--label)",
    )
    parser.add_argument("--label", help="with --import of Markdown: the notes go to notes/Imported/LABEL/")
    mode.add_argument(
        "--await-assignment",
        action="store_true",
        help="start warm, then read one JSON line on stdin: {socket, dir, log} (the gateway's warm spare)",
    )
    mode.add_argument(
        "--fork-server",
        action="store_true",
        help="start warm, then fork one engine per JSON line {socket, dir, log} on stdin, reporting "
        "on stdout (the gateway's fork server; Linux)",
    )
    parser.add_argument("--dir", metavar="PATH", help="the workspace directory")
    parser.add_argument(
        "--create",
        action="store_true",
        help="with --reindex or --import: accept a path that is not a workspace yet",
    )
    parser.add_argument("--embedder-socket", metavar="PATH", help="the host embedder service's socket")
    parser.add_argument(
        "--embedding-provider",
        choices=list(PROVIDERS),
        help="how notes are embedded (overrides the settings' embedding_provider; default: local)",
    )
    parser.add_argument(
        "--settings",
        metavar="FILE",
        type=Path,
        help="the instance-wide settings file (JSON, or TOML by its .toml suffix); see docs/configuration.md",
    )
    parser.add_argument(
        "--index-max-bytes",
        type=int,
        default=MAX_ITEM_BYTES,
        metavar="N",
        help=f"a memory larger than this is kept in the store but not indexed (default {MAX_ITEM_BYTES:,})",
    )
    parser.add_argument(
        "--import-max-bytes",
        type=int,
        default=limits.MAX_TOTAL_BYTES,
        metavar="N",
        help="the most one import or restore may unpack, all files together "
        f"(default {limits.MAX_TOTAL_BYTES:,}; each file at most --index-max-bytes)",
    )
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop cleanly when the process that started this one exits (the gateway passes it)",
    )
    parser.add_argument(
        "--sdk-replies",
        action="store_true",
        help="with --socket: answer every /mcp request through the MCP SDK's HTTP entry, "
        "never the engine's lean path (slower; the same replies)",
    )
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    if not (args.await_assignment or args.fork_server) and not args.dir:
        parser.error("--dir is required")
    if args.index_max_bytes < 1:
        parser.error("--index-max-bytes must be a positive number of bytes")
    if args.import_max_bytes < 1:
        parser.error("--import-max-bytes must be a positive number of bytes")
    for name in ("dir", "socket", "embedder_socket", "export", "import_source"):
        if getattr(args, name):
            setattr(args, name, os.path.expanduser(getattr(args, name)))
    return args


def parse_assignment(line: str) -> tuple[str, str, str | None]:
    """(socket, dir, log) of the gateway's assignment line; raises ValueError/KeyError/TypeError."""
    assignment = json.loads(line)
    log = assignment.get("log")
    return str(assignment["socket"]), str(assignment["dir"]), None if log is None else str(log)


def warm_spare() -> tuple[Served, MCPServer]:
    """What a warm spare does before it knows its workspace: import what serving needs and build the
    tools' server (their schemas: about two thirds of an engine's start once imports are done)."""
    import sqlite_vec  # noqa: F401

    import engine.embed.remote  # noqa: F401  (warm what serving will need; engine.admin is imported)

    served = Served()
    return served, build_server(served, version=VERSION)


def await_assignment(args: argparse.Namespace) -> bool:
    """A warm spare, warmed (:func:`warm_spare`), waits for the workspace to serve.

    Reads one JSON line ``{"socket": …, "dir": …, "log": …}`` on stdin; ``log`` (optional) takes
    over stdout and stderr. End of input without a line means the spare is not needed: False.
    """
    line = sys.stdin.readline()
    if not line.strip():
        return False
    try:
        args.socket, args.dir, log = parse_assignment(line)
    except (ValueError, KeyError, TypeError) as exc:
        print(f"almanac engine: bad assignment line ({exc}); expected {{socket, dir, log}}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    if log:
        fd = os.open(str(log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    return True


def assigned(args: argparse.Namespace, assignment: forkserver.Assignment) -> None:
    """In an engine the fork server forked: become the assigned workspace's engine."""
    forkserver.become(assignment)
    args.socket, args.dir = assignment.socket, assignment.dir


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


def metrics_route(workspace: Workspace) -> Route:
    """``GET /metrics``: the engine's counters for the operator (the gateway forwards only ``/mcp``
    from clients): its group commits' writes, flushes and fsyncs (``perf:write``)."""

    async def metrics(request: Request) -> Response:
        return JSONResponse({"commits": workspace.commits.stats.to_json()})

    return Route("/metrics", metrics, methods=["GET"])


# Host/Origin validation on the engine's own socket too (defence in depth behind the gateway, which
# sends ``Host: localhost`` and no Origin): only loopback names, only loopback browser origins.
LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
SOCKET_SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=[*LOOPBACK, *(f"{host}:*" for host in LOOPBACK)],
    allowed_origins=[
        f"{scheme}://{host}{port}" for scheme in ("http", "https") for host in LOOPBACK for port in ("", ":*")
    ],
)


def socket_app(mcp: MCPServer, admin_routes: Sequence[BaseRoute] = (), *, lean: bool = True) -> Starlette:
    """MCP at ``/mcp``, plus ``/healthz`` and the owner's ``/admin`` routes (the gateway forwards
    only ``/mcp`` from clients; it calls the others itself).

    Two SDK session managers serve ``/mcp``: the streaming one (sessions, SSE, notifications) and
    one in JSON mode for requests that can receive no notification (``engine.surface.replies``);
    of those, a plain one is answered through the SDK's dispatch without its HTTP entry
    (``engine.surface.lean``) unless ``lean`` is False."""
    server = sdk.lowlevel_server(mcp)
    streaming = StreamableHTTPSessionManager(app=server, security_settings=SOCKET_SECURITY)
    single = StreamableHTTPSessionManager(app=server, security_settings=SOCKET_SECURITY, json_response=True)
    replies = Replies(streaming, single, Lean(server, SOCKET_SECURITY, Direct(mcp)) if lean else None)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with streaming.run(), single.run():
            yield

    routes = [Route("/healthz", healthz, methods=["GET"]), *admin_routes]
    app = Starlette(routes=[*routes, Route("/mcp", replies)], lifespan=lifespan)
    app.state.replies = replies  # engine.surface.protocol answers plain tool calls through it
    return app


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM after its graceful shutdown (exit 143); we want a clean 0.
    ``on_stop`` runs when a stop is asked for (work in threads can give up at once)."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_stop = on_stop

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop)
        yield

    def _stop(self) -> None:
        if self.on_stop is not None:
            self.on_stop()
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True


def serve_socket(
    mcp: MCPServer,
    path: str,
    admin_routes: Sequence[BaseRoute] = (),
    *,
    lean: bool = True,
    on_stop: Callable[[], None] | None = None,
) -> None:
    sock = _bind(path)
    app = socket_app(mcp, admin_routes, lean=lean)
    # uvicorn's httptools protocol (h11 costs the loop ~0.4 ms more per call, docs/benchmarks.md);
    # with the lean path, one that answers a plain tool call without the ASGI app
    # (engine.surface.protocol).
    http: type[asyncio.Protocol] | str = protocol_for(app.state.replies) if lean else "httptools"
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=GRACE_S,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        access_log=False,
        http=http,
    )
    server = _Server(config, on_stop)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def embedder_for(settings: EngineSettings, embedder_socket: str | None) -> Embedder:
    """The provider the settings name; ``local`` is the host's shared service when the gateway gave one."""
    if settings.embedding_provider == "off":
        return make_embedder("off")
    if settings.embedding_provider == "vertex":
        return make_embedder(
            "vertex",
            project=settings.vertex_project,
            location=settings.vertex_location,
            base_url=settings.vertex_base_url,
            batch_size=settings.vertex_batch_size,
        )
    if embedder_socket:
        return make_embedder("remote", socket_path=embedder_socket)
    return make_embedder("local")


def recall_settings(settings: EngineSettings) -> RecallSettings:
    return RecallSettings(
        max_tokens_default=settings.max_tokens_default,
        facts_share=settings.facts_share,
        facts_for_query=settings.facts_limit,
        notes_limit=settings.notes_limit,
        min_match_score=settings.min_match_score,
        match_floor=settings.match_floor,
        include_archived=settings.include_archived,
        semantic=settings.embedding_provider != "off",
    )


def import_limits(args: argparse.Namespace) -> limits.Limits:
    """How much an import may unpack: each file at most the index's limit, all together at most
    ``--import-max-bytes``."""
    return limits.Limits(file_bytes=args.index_max_bytes, total_bytes=args.import_max_bytes)


def transfer(workspace: Workspace, args: argparse.Namespace) -> int:
    """``--export`` or ``--import`` on an open (locked) workspace."""
    if args.export:
        archive.export(workspace, Path(args.export).resolve())
        return 0
    source = Path(args.import_source).resolve()
    bounds = import_limits(args)
    if archive.is_export(source, bounds):
        archive.restore(workspace, source, limits=bounds)
    elif not args.label:
        raise BadImport(f"{source} is not an Almanac export; importing Markdown needs --label NAME")
    else:
        markdown.import_markdown(workspace, source, args.label, limits=bounds)
    return 0


def main(argv: list[str] | None = None) -> int:
    parent = os.getppid()
    args = parse_args(argv)
    one_blas_thread()
    if args.fork_server:
        # the lifeline of every engine it forks: the gateway itself, watched without a thread here
        lifeline = forkserver.gateway_pidfd(parent) if args.exit_with_parent else None
        if args.exit_with_parent and lifeline is None:
            return 0
        prebuilt: tuple[Served, MCPServer] | None = warm_spare()
        if not forkserver.serve(lambda assignment: assigned(args, assignment)):
            return 0  # the template: its input ended
        if lifeline is not None:
            watch_pidfd(lifeline)
    else:
        if args.exit_with_parent:
            watch_parent(parent)
        prebuilt = warm_spare() if args.await_assignment else None
        if args.await_assignment and not await_assignment(args):
            return 0
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    root = Path(args.dir).resolve()
    if args.reindex or args.doctor or args.export or args.import_source:
        try:
            if args.import_source and args.label is not None:
                markdown.check_label(args.label)  # before anything is opened or created
            maintenance.check_workspace(root, create=args.create and not (args.doctor or args.export))
        except (NotAWorkspace, BadImport) as exc:
            print(f"almanac engine: {exc.message}", file=sys.stderr)
            return EXIT_USAGE
    workspace = Workspace(root)
    try:
        workspace.open(clear_staging=not args.doctor)  # the doctor only reads
    except WorkspaceLocked as exc:
        print(f"almanac engine: {exc.message}", file=sys.stderr)
        return EXIT_LOCKED
    if args.export or args.import_source:
        try:
            return transfer(workspace, args)
        except BadImport as exc:
            print(f"almanac engine: {exc.message}", file=sys.stderr)
            return EXIT_USAGE
        finally:
            workspace.close()
    overrides = {"embedding_provider": args.embedding_provider} if args.embedding_provider else None
    loaded = engine_settings.load(args.settings, workspace.root, overrides)
    for problem in loaded.problems:
        log.warning("%s", problem)
    settings = loaded.settings
    embedder = embedder_for(settings, args.embedder_socket)
    settled = True
    try:
        if args.doctor:
            found = maintenance.diagnose(workspace, embedder.model_id, max_item_bytes=args.index_max_bytes)
            return maintenance.report(found, root)
        if args.reindex:
            maintenance.reindex(workspace, embedder, max_item_bytes=args.index_max_bytes)
            return 0
        indexer = Indexer(workspace, embedder, max_item_bytes=args.index_max_bytes)
        indexer.start(catch_up_in_background=True)
        try:
            ageing = Lifecycle(workspace, settings, utc_now)
            ageing.start()
            try:
                memory = Memory(workspace, utc_now, on_save=ageing.saved)
                recall = Recall(indexer, recall_settings(settings), ageing, loaded)
                if prebuilt is None:
                    mcp = build_server(memory, version=VERSION, recall=recall)
                else:
                    served, mcp = prebuilt
                    served.memory, served.recall = memory, recall
                if args.stdio:
                    anyio.run(mcp.run_stdio_async)
                else:
                    parts = admin.Parts(
                        workspace=workspace,
                        memory=memory,
                        indexer=indexer,
                        settings=loaded,
                        instance_file=args.settings,
                        overrides=overrides,
                        import_limits=import_limits(args),
                    )
                    serve_socket(
                        mcp,
                        args.socket,
                        [*admin.routes(parts), metrics_route(workspace)],
                        lean=not args.sdk_replies,
                        on_stop=parts.stopping.set,
                    )
            finally:
                ageing.stop()
        finally:
            indexer.halt()
            settled = finish_writes(workspace)
            indexer.stop()
    finally:
        if settled:
            workspace.close()
    return 0


def finish_writes(workspace: Workspace) -> bool:
    """Wait (bounded) for a write still running in a worker thread, then keep further ones out.

    Every write holds the workspace lock from its first byte to its last fsync, and taking it
    finishes the writes a group commit has registered (engine.store.commit), so holding the lock
    here means none is half done; it is never released (the process is ending).
    """
    if workspace.lock.acquire(timeout=WRITE_GRACE_S):
        return True
    log.error("a write did not finish within %.0f s of the stop; exiting without it", WRITE_GRACE_S)
    return False


def exit_now(code: int) -> None:
    """Exit with ``code`` even if a worker thread is stuck in a call (it must not hold the exit)."""
    stuck = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    stuck += TOOL_THREADS.busy()
    if stuck:
        log.warning("exiting with %d call(s) still running: %s", len(stuck), ", ".join(stuck))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
