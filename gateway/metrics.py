"""Prometheus metrics (``gw:ops``), in a registry of their own per app (tests build many apps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "almanac_requests",
            "MCP requests answered, by method and status.",
            ["method", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "almanac_request_seconds",
            "Time from an MCP request arriving to its response headers being sent.",
            ["method"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.engines_running = Gauge("almanac_engines_running", "Engine processes running.", registry=r)
        self.cold_starts = Counter("almanac_engine_cold_starts", "Engines started.", registry=r)
        self.cold_start_seconds = Histogram(
            "almanac_engine_start_seconds",
            "Time from spawning an engine to its first healthy answer.",
            buckets=(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30),
            registry=r,
        )
        self.starts_by_kind = Counter(
            "almanac_engine_starts",
            "Engines started, by how: forked from the fork server, the warm spare handed its "
            "workspace, or spawned cold.",
            ["kind"],
            registry=r,
        )
        self.starts_queued = Gauge(
            "almanac_engine_starts_queued",
            "Engine starts waiting for their turn in the start queue.",
            registry=r,
        )
        self.engines_starting = Gauge(
            "almanac_engines_starting", "Engine starts under way (spawned, not yet healthy).", registry=r
        )
        self.engine_stops = Counter(
            "almanac_engine_stops", "Engines stopped by the gateway, by reason.", ["reason"], registry=r
        )
        self.engine_crashes = Counter("almanac_engine_crashes", "Engines that exited unasked.", registry=r)
        self.unavailable = Counter(
            "almanac_unavailable", "Requests answered 503, by error code.", ["code"], registry=r
        )
        self.rate_limited = Counter("almanac_rate_limited", "Requests answered 429.", registry=r)
        self.sessions_reopened = Counter(
            "almanac_sessions_reopened",
            "2025-era sessions opened again on a new engine process of their workspace.",
            registry=r,
        )
        self.auth_failures = Counter(
            "almanac_auth_failures", "Requests refused 401 or 403, by error code.", ["code"], registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
