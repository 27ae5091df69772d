"""``almanac serve`` as a process: a SIGTERM (or Ctrl-C) stops every engine and exits 0."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from gateway.serve import advertise_with_port, banner
from tests.gateway.e2e import alive, connect, data, start_gateway, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.req("run:cli", "engine:idle")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_signal_stops_the_engines_and_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    gw = start_gateway(tmp_path / "data", tmp_path / "gateway.log", engine_start_timeout="60")
    try:
        gw.owner("stop@example.com")
        gw.owner("halt@example.com")
        tokens = [gw.token("stop@example.com", "a"), gw.token("halt@example.com", "b")]
        for token in tokens:
            async with connect(gw, token) as c:
                data(await c.call_tool("remember", {"statement": "written before the stop"}))
        engines = list(gw.engines().values())
        assert len(engines) == 2
        gw.proc.send_signal(sig)
        assert gw.proc.wait(timeout=60) == 0
        wait_for(lambda: not any(alive(pid) for pid in engines), what="the engines to stop")
    finally:
        if gw.proc.poll() is None:  # pragma: no cover - only when the test fails
            gw.proc.kill()
            gw.proc.wait()
        gw.reader.join(timeout=10)
        if gw.proc.stdout is not None:
            gw.proc.stdout.close()
    events = (tmp_path / "gateway.log").read_text()
    assert events.count('"event": "engine.stop"') == 2 and '"reason": "shutdown"' in events


@pytest.mark.req("run:scale-out")
def test_an_advertise_url_with_port_0_names_the_port_bound() -> None:
    assert advertise_with_port("http://127.0.0.1:0", 41234) == "http://127.0.0.1:41234"
    assert advertise_with_port("https://[::1]:0/base", 8443) == "https://[::1]:8443/base"
    assert advertise_with_port("http://node-a.internal:8080", 41234) == "http://node-a.internal:8080"
    assert advertise_with_port("http://node-a.internal", 41234) == "http://node-a.internal"


def _register_from(gateway_url: str, forwarded: str | None) -> int:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    body = {"redirect_uris": ["http://127.0.0.1/cb"]}
    return httpx.post(gateway_url + "/register", json=body, headers=headers, timeout=30).status_code


@pytest.mark.req("sec:authz")
def test_forwarded_addresses_are_believed_only_from_a_trusted_proxy(tmp_path: Path) -> None:
    """The per-address limits count the peer unless ``trusted_proxies`` names it: a client cannot
    dodge them by claiming another address, and behind a named proxy each client counts alone."""
    direct = start_gateway(tmp_path / "direct", tmp_path / "direct.log", register_rate_limit="2")
    try:
        assert [_register_from(direct.url, f"203.0.113.{n}") for n in range(3)] == [201, 201, 429]
    finally:
        direct.stop()
    proxied = start_gateway(
        tmp_path / "proxied", tmp_path / "proxied.log", register_rate_limit="2", trusted_proxies="127.0.0.1"
    )
    try:
        assert [_register_from(proxied.url, "203.0.113.7") for _ in range(3)] == [201, 201, 429]
        assert _register_from(proxied.url, "203.0.113.8") == 201  # another client behind the proxy
    finally:
        proxied.stop()


@pytest.mark.req("run:cli")
def test_the_banner_says_how_to_sign_up_on_the_site_as_the_setting_allows() -> None:
    base = "http://127.0.0.1:8080"
    opened = banner(base, "/srv", signup="open")
    assert f"Sign up in a browser at {base}/signup; then add {base}/mcp to a client" in opened
    invited = banner(base, "/srv", signup="invite")
    assert f"Sign-up at {base}/signup needs an invite: almanac invite create --data-dir /srv\n" in invited
    closed = banner(base, "/srv", signup="closed")
    assert "Sign-up on the site is closed." in closed and "/signup" not in closed
    for text in (opened, invited, closed):
        assert "owner create you@example.com --data-dir /srv" in text
