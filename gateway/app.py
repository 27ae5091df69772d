"""The composition root: :func:`create_app` builds the whole gateway from one :class:`Settings`.

Nothing below this module reads the environment or a config file; everything it needs is passed in.
"""

from __future__ import annotations

import ipaddress
import logging
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway import headers as hdr
from gateway import layout, logs
from gateway.api.rest import RestApi
from gateway.auth.accounts import AccountPolicy, SignupMode, ThrottlePolicy, default_cookie_secure
from gateway.auth.limits import AddressLimits
from gateway.auth.oauth import routes as oauth_routes
from gateway.auth.oauth.config import CimdPolicy, OAuthConfig, OAuthServer
from gateway.auth.sessions import AccountContext
from gateway.cluster import volume
from gateway.cluster.dbclock import DatabaseClock
from gateway.cluster.fencing import Fence, NameLock
from gateway.cluster.forward import INTERNAL_MCP_PATH, INTERNAL_REST_PREFIX, ClusterLink, Forwarder
from gateway.cluster.forwarded_engine import InternalEngine, InternalEngineControl
from gateway.cluster.forwarded_mcp import AdvertisedOnly, InternalMcp
from gateway.cluster.membership import NodeConfig, keep_alive
from gateway.cluster.move.endpoints import MoveEndpoints
from gateway.cluster.remote import INTERNAL_ENGINE_CONTROL, INTERNAL_ENGINE_PREFIX, Engines
from gateway.cluster.rest import InternalRest, RestForwarding
from gateway.cluster.restore.endpoints import RestoreEndpoints
from gateway.cluster.router import Router, RouterConfig
from gateway.control.clock import iso
from gateway.control.records import Principal, TokenLifetimes
from gateway.control.store import ControlPlane
from gateway.edge.principals import ForgetAfterChanges, PrincipalCache
from gateway.edge.proxy import McpProxy
from gateway.engines import policy, procs, startq
from gateway.engines.embedder import EmbedderService
from gateway.engines.supervisor import Supervisor, SupervisorConfig
from gateway.errors import GatewayError, NotFound, render
from gateway.metrics import CONTENT_TYPE, Metrics
from gateway.ratelimit import RateLimiter
from gateway.settings import Settings
from gateway.web import (
    account,
    activity,
    connections,
    consent,
    erase,
    memories,
    oidc,
    refusal,
    reset,
    tokens,
    workspace,
    workspace_settings,
)
from gateway.web.render import STATIC


@dataclass(frozen=True)
class Components:
    """Everything the app is made of, for the routes (and for tests to look at)."""

    settings: Settings
    store: ControlPlane
    metrics: Metrics
    supervisor: Supervisor
    engines: Engines  # the pages' way to an engine: here, or on the workspace's node
    embedder: EmbedderService | None
    origin_policy: hdr.OriginPolicy
    accounts: AccountPolicy


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def account_policy(settings: Settings) -> AccountPolicy:
    signup: SignupMode = "open"
    if settings.signup in ("invite", "closed"):
        signup = "invite" if settings.signup == "invite" else "closed"
    secure = settings.cookie_secure
    if secure is None:
        secure = default_cookie_secure(settings.public_url, settings.host)
    return AccountPolicy(
        signup=signup,
        cookie_secure=secure,
        session_max_age=settings.session_max_age,
        throttle=ThrottlePolicy(
            per_account=settings.login_max_failures,
            per_address=settings.login_max_failures_per_address,
            per_account_total=settings.login_max_failures_per_account,
            window=settings.login_throttle_window,
        ),
        public_url=settings.public_url.rstrip("/") if settings.public_url else None,
        oidc_enabled=settings.oidc_issuer is not None,
        oidc_name=settings.oidc_name,
    )


def build(settings: Settings) -> Components:
    data_dir = settings.data_dir.resolve()
    run_dir = layout.runtime_dir(data_dir, settings.runtime_dir)
    restart = policy.RestartPolicy(
        backoff_initial=settings.restart_backoff_initial,
        backoff_max=settings.restart_backoff_max,
        crash_loop_threshold=settings.crash_loop_threshold,
        crash_loop_window=settings.crash_loop_window,
    )
    embedder: EmbedderService | None = None
    if settings.embedder:
        socket = layout.socket_path(run_dir, "embedder")
        command = settings.embedder_command or (sys.executable, "-m", "engine.embed")
        spec = procs.Spec((*command, "--socket", str(socket)), socket, layout.log_file(data_dir, "embedder"))
        embedder = EmbedderService(spec, start_timeout=settings.embedder_start_timeout, restart=restart)
    metrics = Metrics()
    supervisor = Supervisor(
        SupervisorConfig(
            engine_command=settings.engine_command or (sys.executable, "-m", "engine"),
            data_dir=data_dir,
            run_dir=run_dir,
            idle_timeout=settings.engine_idle_timeout,
            start_timeout=settings.engine_start_timeout,
            stop_timeout=settings.engine_stop_timeout,
            max_engines=settings.max_engines,
            max_connections=settings.engine_max_connections,
            retry_after=settings.retry_after,
            restart=restart,
            embedder_socket=embedder.spec.socket if embedder else None,
            engine_settings_file=settings.engine_settings_file,
            import_max_unpacked_bytes=settings.import_max_unpacked_bytes,
            warm_spare=settings.engine_warm_spare,
            fork_server=settings.engine_fork_server,
            start_concurrency=settings.engine_start_concurrency or startq.default_concurrency(),
            start_kill_timeout=settings.engine_start_kill_timeout,
        ),
        metrics,
    )
    origin_policy = hdr.OriginPolicy(
        public_url=settings.public_url,
        origins=frozenset(settings.allowed_origins),
        hosts=frozenset(h.lower() for h in settings.allowed_hosts),
        loopback=is_loopback(settings.host),
    )
    store = ControlPlane.connect(settings.database_url, layout.control_db(data_dir))
    return Components(
        settings,
        store,
        metrics,
        supervisor,
        Engines(supervisor),
        embedder,
        origin_policy,
        account_policy(settings),
    )


def wants_page(request: Request) -> bool:
    """A browser asking for a page (not an API client, not ``/mcp`` or ``/.well-known``)."""
    path = request.url.path
    if path == "/mcp" or path.startswith(("/.well-known/", "/static/", "/api/")):
        return False
    return "text/html" in request.headers.get("accept", "")


def oauth_config(settings: Settings) -> OAuthConfig:
    return OAuthConfig(
        lifetimes=TokenLifetimes(
            access=settings.oauth_access_token_ttl, refresh=settings.oauth_refresh_token_ttl
        ),
        code_ttl=settings.oauth_code_ttl,
        unused_client_ttl=settings.oauth_unused_client_ttl,
        max_unused_clients=settings.oauth_max_unused_clients,
        cimd=CimdPolicy(
            timeout=settings.oauth_cimd_timeout,
            max_bytes=settings.oauth_cimd_max_bytes,
            allow_private=settings.oauth_cimd_allow_private,
        ),
    )


def _holds_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def join(settings: Settings, store: ControlPlane, node: NodeConfig, clock: Callable[[], float]) -> Fence:
    """This process starts as ``node`` (it holds the name's lock): its volume checked against the
    one recorded for the node (:mod:`gateway.cluster.volume`), a new fencing token, and its leases
    renewed — served once the previous process's have run out."""
    data_dir = settings.data_dir.resolve()
    known = store.nodes.volume(node.name)
    found = volume.read_identity(data_dir)
    verdict = volume.decide(known.recorded, found, known.placed)
    if verdict.adopt and found is None:
        found = volume.write_identity(data_dir)
    joined = store.nodes.join(
        node.name, node.advertise_url, now=clock(), volume_seen=found or "", adopt=verdict.adopt
    )
    if not verdict.adopt:
        logs.event(
            logs.get(),
            logging.ERROR,
            "node.volume_mismatch",
            node=node.name,
            data_dir=str(data_dir),
            error=f"this data directory holds {verdict.reason}: its workspaces are refused as lost "
            "(almanac node lost lists them) until the node is started on its own volume",
        )
    fence = Fence(node.lease, joined.generation, joined.previous_lease, settings.retry_after)
    began = fence.monotonic()
    store.nodes.heartbeat(node.name, now=clock(), lease=node.lease, generation=joined.generation)
    fence.record_renewal(began)
    return fence


def release(store: ControlPlane, node: NodeConfig, fence: Fence, clock: Callable[[], float]) -> None:
    """A clean stop (engines stopped): this process's leases end now, so its next start serves at
    once. A failure is logged: the leases then simply run out."""
    try:
        store.nodes.release(node.name, fence.generation, now=clock())
    except Exception as exc:
        logs.event(logs.get(), logging.WARNING, "node.release_failed", node=node.name, error=str(exc))


def cluster_link(
    settings: Settings,
    parts: Components,
    node: NodeConfig | None,
    clock: Callable[[], float],
    fence: Fence | None = None,
) -> ClusterLink | None:
    """Node mode: every call is routed by its workspace's placement, and no engine starts here for a
    workspace this node does not hold (the supervisor's admission check)."""
    if node is None or settings.cluster_secret is None:
        return None
    router = Router(
        parts.store,
        RouterConfig(
            here=node.name,
            heartbeat_timeout=settings.placement_lease,
            lease=settings.placement_lease,
            retry_after=settings.retry_after,
        ),
        clock=clock,
        has_folder=lambda workspace_id: _holds_files(
            settings.data_dir.resolve() / "workspaces" / workspace_id
        ),
        fence=fence,
    )
    parts.supervisor.admit = router.require_local
    link = ClusterLink(
        node.name,
        settings.cluster_secret,
        router,
        Forwarder(settings.cluster_secret, timeout=settings.forward_timeout, clock=clock),
    )
    parts.engines.link = link  # pages reach a workspace placed elsewhere through its node
    return link


class Gateway(Starlette):
    """The Starlette app, with ``/mcp`` handed straight to the proxy (``perf:gateway``).

    The memory traffic needs none of the stack around the routes: the proxy is pure ASGI, answers
    its own errors, and leaves the principal cache alone (:class:`ForgetAfterChanges` keeps it for
    ``/mcp``); an exception it does not handle gets uvicorn's own 500, as the stack's outermost
    layer would give. Every other path — ``/mcp/``, the pages, the APIs — goes through the stack."""

    def __init__(self, *, mcp: ASGIApp, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/mcp" and not scope.get("root_path"):
            await self.mcp(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(settings: Settings, *, clock: Callable[[], float] = time.time) -> Starlette:
    """The gateway. ``clock`` (this host's wall time, epoch seconds) decides token and code expiry;
    what nodes judge of each other goes by the database's clock (:mod:`gateway.cluster.dbclock`)."""
    parts = build(settings)
    node: NodeConfig | None = None
    fence: Fence | None = None
    lock: NameLock | None = None
    # between nodes, every time is the database's (heartbeats, leases, deadlines, signatures), never
    # this host's wall clock: ``clock`` then only decides what this node alone judges (tokens, codes)
    database = DatabaseClock(parts.store.database_time)
    cluster_clock = database.now
    if settings.node is not None and settings.advertise_url is not None:
        node = NodeConfig(
            settings.node, settings.advertise_url, settings.node_heartbeat_interval, settings.placement_lease
        )
        assert settings.database_url is not None  # settings refuse a node without it
        lock = NameLock.take(settings.database_url, node.name)  # a second process under the name: refused
        try:
            database.sync()
            fence = join(settings, parts.store, node, cluster_clock)
        except BaseException:
            lock.close()
            raise
    link = cluster_link(settings, parts, node, cluster_clock, fence)
    moves = None if link is None else MoveEndpoints(link, parts.supervisor, parts.store, clock=cluster_clock)
    limiter = RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)  # /mcp and REST share it
    public_limits = AddressLimits(
        {
            "register": settings.register_rate_limit,
            "token": settings.token_rate_limit,
            "signin": settings.signin_rate_limit,
            "authorize": settings.authorize_rate_limit,
        },
        clock=clock,
    )
    oauth = OAuthServer(parts.store, oauth_config(settings), parts.origin_policy, clock, public_limits)
    store = parts.store
    principals = PrincipalCache(
        lambda secret, now: store.connections.authenticate(secret, now=iso(now)), clock=clock
    )
    proxy = McpProxy(
        store=parts.store,
        supervisor=parts.supervisor,
        origin_policy=parts.origin_policy,
        limiter=limiter,
        metrics=parts.metrics,
        max_body_bytes=settings.max_body_bytes,
        retry_after=settings.retry_after,
        wall_clock=clock,
        principals=principals,
        cluster=link,
    )

    def audit(kind: str, who: Principal, remote: str | None, detail: dict[str, object]) -> None:
        parts.store.audit_log.record(
            kind,
            owner_id=who.owner_id,
            workspace_id=who.workspace_id,
            connection_id=who.connection_id,
            remote=remote,
            detail=detail,
        )

    rest = RestApi(
        authenticate=proxy.authenticate,
        engines=parts.supervisor,
        origin_policy=parts.origin_policy,
        limiter=limiter,
        max_body_bytes=settings.max_body_bytes,
        audit=audit,
        max_import_bytes=settings.import_max_bytes,
        restart=lambda workspace_id: parts.supervisor.stop(workspace_id, reason="restore"),
        store=parts.store,
        restart_engine=parts.supervisor.restart,
        touch=proxy.touch,
    )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        checks: dict[str, str] = {}
        try:
            parts.store.ping()
            checks["control_plane"] = "ok"
        except Exception as exc:  # any database failure means not ready
            checks["control_plane"] = f"failed: {exc}"
        if parts.embedder is not None:
            checks["embedder"] = parts.embedder.status
        ready = checks["control_plane"] == "ok"
        body = {
            "status": "ready" if ready else "not_ready",
            "checks": checks,
            "engines_running": len(parts.supervisor.running()),
        }
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(parts.metrics.render(), media_type=CONTENT_TYPE)

    async def on_error(request: Request, exc: Exception) -> Response:
        error = exc if isinstance(exc, GatewayError) else NotFound(f"nothing at {request.url.path}")
        if wants_page(request):
            return account.error_page(request, error)
        status, headers, body = render(error)
        return Response(body, status_code=status, headers=headers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            if parts.embedder is not None:
                tg.start_soon(parts.embedder.run)
            if node is not None:
                tg.start_soon(
                    keep_alive,
                    parts.store.nodes,
                    node,
                    cluster_clock,
                    None if moves is None else moves.tend,
                    fence,
                    lock,
                    database.sync,
                )
            async with parts.supervisor:
                yield
                if fence is not None:
                    fence.stopped = True  # from here on nothing of this node's is served
            tg.cancel_scope.cancel()
        if node is not None and fence is not None:
            release(parts.store, node, fence, cluster_clock)
        if lock is not None:
            lock.close()
        await parts.engines.aclose()
        if link is not None:
            await link.forwarder.aclose()
        parts.store.close()
        run_dir = parts.supervisor.config.run_dir
        if layout.is_temporary(run_dir, settings.data_dir, settings.runtime_dir):
            shutil.rmtree(run_dir, ignore_errors=True)  # only sockets of processes now stopped

    sign_in_with: list[BaseRoute] = []
    if settings.oidc_issuer and settings.oidc_client_id and settings.oidc_client_secret:
        sign_in_with = oidc.routes(
            oidc.OidcConfig(settings.oidc_issuer, settings.oidc_client_id, settings.oidc_client_secret)
        )
    internal: list[BaseRoute] = []
    middleware = [Middleware(ForgetAfterChanges, cache=principals)]
    rest_body_limit = max(settings.max_body_bytes, settings.import_max_bytes)
    if link is not None and moves is not None:
        internal = [
            Route(INTERNAL_MCP_PATH, InternalMcp(proxy, link, clock=cluster_clock), methods=None),
            *moves.routes(),
            *RestoreEndpoints(moves).routes(),
            Route(
                INTERNAL_ENGINE_PREFIX + "/{rest:path}",
                InternalEngine(link, parts.supervisor, max_body_bytes=rest_body_limit, clock=cluster_clock),
                methods=None,
            ),
            Route(
                INTERNAL_ENGINE_CONTROL,
                InternalEngineControl(link, parts.supervisor, max_body_bytes=4096, clock=cluster_clock),
                methods=["POST"],
            ),
            Route(
                INTERNAL_REST_PREFIX + "/{rest:path}",
                InternalRest(
                    link,
                    max_body_bytes=rest_body_limit,
                    retry_after=settings.retry_after,
                    clock=cluster_clock,
                ),
                methods=None,
            ),
        ]
        for found in internal:  # never answered through the public name (an Ingress, a balancer)
            if isinstance(found, Route) and node is not None:
                found.app = AdvertisedOnly(found.app, node.advertise_url)
        middleware.append(
            Middleware(
                RestForwarding,
                link=link,
                proxy=proxy,
                principal=rest.principal_of,
                max_body_bytes=rest_body_limit,
            )
        )
    app = Gateway(
        mcp=proxy,
        routes=[
            Route("/mcp", proxy, methods=None),
            *internal,
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            *oauth_routes.routes(oauth, for_browser=refusal.for_browser),
            *consent.routes(oauth),
            *rest.routes(),
            *account.routes(),
            *reset.routes(),
            *memories.routes(),
            *tokens.routes(),
            *erase.routes(),
            *connections.routes(),
            *workspace.routes(),
            *workspace_settings.routes(),
            *activity.routes(),
            *sign_in_with,
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={GatewayError: on_error, 404: on_error},
        middleware=middleware,
        lifespan=lifespan,
    )
    app.state.components = parts
    app.state.principals = principals
    app.state.accounts = AccountContext(parts.store, parts.accounts, public_limits)
    return app
