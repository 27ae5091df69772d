"""The assembled app: ops endpoints, metadata, the error envelope (gw:ops, gw:route)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gateway.app import build, create_app
from tests.gateway.conftest import make_settings


@pytest.fixture
def client(data_dir: Path) -> TestClient:
    return TestClient(create_app(make_settings(data_dir, allowed_hosts=("testserver",))))


@pytest.mark.req("gw:ops")
def test_health_readiness_and_metrics(client: TestClient) -> None:
    with client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "checks": {"control_plane": "ok"}, "engines_running": 0}
        client.post("/mcp", json={})
        metrics = client.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        for name in (
            "almanac_requests_total",
            "almanac_request_seconds_bucket",
            "almanac_engines_running",
            "almanac_engine_cold_starts_total",
            "almanac_engine_starts_queued",
            "almanac_engines_starting",
            "almanac_unavailable_total",
        ):
            assert name in text, name
        assert 'almanac_requests_total{method="POST",status="401"} 1.0' in text


@pytest.mark.req("gw:spawn")
def test_engine_starts_at_once_default_to_the_cores(data_dir: Path) -> None:
    for settings, concurrency, kill in (
        ({}, len(os.sched_getaffinity(0)), 300.0),
        ({"engine_start_concurrency": 3, "engine_start_kill_timeout": 99.0}, 3, 99.0),
    ):
        parts = build(make_settings(data_dir, **settings))
        try:
            assert parts.supervisor.config.start_concurrency == concurrency
            assert parts.supervisor.queue.concurrency == concurrency
            assert parts.supervisor.config.start_kill_timeout == kill
        finally:
            parts.store.close()


@pytest.mark.req("gw:route")
def test_protected_resource_metadata(client: TestClient) -> None:
    with client:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            doc = client.get(path).json()
            assert doc["resource"] == "http://testserver/mcp"
            assert doc["bearer_methods_supported"] == ["header"]
            assert doc["authorization_servers"] == ["http://testserver"]
        www = client.post("/mcp", json={}).headers["www-authenticate"]
        assert www == (
            'Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp", '
            'scope="memory"'
        )


@pytest.mark.req("gw:ops")
def test_unknown_paths_get_the_json_envelope(client: TestClient) -> None:
    with client:
        r = client.get("/nope")
        assert r.status_code == 404
        assert r.json() == {"error": {"code": "not_found", "message": "nothing at /nope"}}


@pytest.mark.req("gw:ops", "run:config")
def test_public_url_drives_the_advertised_urls(data_dir: Path) -> None:
    app = create_app(make_settings(data_dir, public_url="https://mem.example.com"))
    with TestClient(app, base_url="https://mem.example.com") as client:
        assert client.get("/.well-known/oauth-protected-resource").json()["resource"] == (
            "https://mem.example.com/mcp"
        )
        assert client.post("/mcp", json={}).status_code == 401
        assert client.post("/mcp", json={}, headers={"Host": "other.example"}).status_code == 403


@pytest.mark.req("gw:spawn")
def test_a_fallback_socket_folder_is_removed_at_stop_and_data_dir_run_is_kept(tmp_path: Path) -> None:
    long_dir = tmp_path / ("d" * 100)  # <data_dir>/run too long for a socket path: a temporary folder
    app = create_app(make_settings(long_dir, allowed_hosts=("testserver",)))
    with TestClient(app):
        run_dir = app.state.components.supervisor.config.run_dir
        assert run_dir.is_dir() and not run_dir.is_relative_to(long_dir)
    assert not run_dir.exists()
    with tempfile.TemporaryDirectory(prefix="a-", dir="/tmp") as short:  # short enough, however run
        short_dir = Path(short) / "data"
        app = create_app(make_settings(short_dir, allowed_hosts=("testserver",)))
        with TestClient(app):
            assert app.state.components.supervisor.config.run_dir == short_dir.resolve() / "run"
        assert (short_dir / "run").is_dir()  # the operator's own folder stays
