"""Pure proxy rules: header allowlists, identity headers, Host and Origin (gw:route)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway import headers as hdr
from gateway.control.records import Principal

ADA = Principal("own_1", "ws_1", "con_1", "Claude Code on laptop", read_only=True, scope="project:fjord")


@pytest.mark.req("gw:route")
def test_only_allowlisted_headers_go_upstream_and_identity_is_added() -> None:
    incoming = [
        (b"authorization", b"Bearer alm_pat_secret"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"Mcp-Session-Id", b"abc"),
        (b"mcp-protocol-version", b"2025-11-25"),
        (b"mcp-param-x", b"1"),
        (b"x-almanac-read-only", b"0"),
        (b"X-Almanac-Connection", b"forged"),
        (b"cookie", b"a=b"),
        (b"host", b"evil.example"),
        (b"x-forwarded-for", b"1.2.3.4"),
    ]
    out = dict(hdr.upstream_request(incoming, ADA))
    assert b"authorization" not in out and b"cookie" not in out and b"x-forwarded-for" not in out
    assert out[b"mcp-session-id"] == b"abc" and out[b"mcp-param-x"] == b"1"
    assert out[b"host"] == b"localhost"
    assert out[b"x-almanac-connection"] == b"Claude%20Code%20on%20laptop"
    assert out[b"x-almanac-read-only"] == b"1"
    assert out[b"x-almanac-scope"] == b"project:fjord"
    assert out[b"x-almanac-scope-unscoped"] == b"0"  # a pin reads its scope only unless chosen
    wide = dict(
        hdr.upstream_request([(b"x-almanac-scope-unscoped", b"0")], replace(ADA, reads_unscoped=True))
    )
    assert wide[b"x-almanac-scope-unscoped"] == b"1"
    forged = hdr.upstream_request([(b"X-Almanac-Scope-Unscoped", b"1")], ADA)
    assert [v for k, v in forged if k.lower() == b"x-almanac-scope-unscoped"] == [b"0"]
    assert [k for k, _ in hdr.upstream_request(incoming, ADA)].count(b"x-almanac-read-only") == 1
    plain = Principal("own_1", "ws_1", "con_2", "Zoë's ☕ agent", read_only=False, scope=None)
    out = dict(hdr.upstream_request([], plain))
    assert out[b"x-almanac-connection"] == b"Zo%C3%AB%27s%20%E2%98%95%20agent"
    assert b"x-almanac-scope" not in out and b"x-almanac-scope-unscoped" not in out


@pytest.mark.req("gw:route")
def test_response_headers_are_allowlisted_and_sse_is_unbuffered() -> None:
    out = dict(
        hdr.downstream_response(
            [(b"content-type", b"text/event-stream"), (b"mcp-session-id", b"s"), (b"content-length", b"9"),
             (b"set-cookie", b"x"), (b"transfer-encoding", b"chunked")]
        )
    )  # fmt: skip
    assert out == {
        b"content-type": b"text/event-stream",
        b"mcp-session-id": b"s",
        b"x-accel-buffering": b"no",
    }


@pytest.mark.req("gw:route")
def test_host_and_origin_rules() -> None:
    local = hdr.OriginPolicy(public_url=None, origins=frozenset(), hosts=frozenset(), loopback=True)
    assert hdr.host_allowed(local, "127.0.0.1:8080")
    assert hdr.host_allowed(local, "localhost")
    assert hdr.host_allowed(local, "[::1]:80")
    assert not hdr.host_allowed(local, "evil.example:8080")
    assert not hdr.host_allowed(local, None)
    base = hdr.base_url(local, "http", "127.0.0.1:8080")
    assert base == "http://127.0.0.1:8080"
    assert hdr.origin_allowed(local, None, base)
    assert hdr.origin_allowed(local, "http://127.0.0.1:8080", base)
    assert not hdr.origin_allowed(local, "http://evil.example:8080", base)
    assert not hdr.origin_allowed(local, "null", base)
    public = hdr.OriginPolicy(
        public_url="https://mem.example.com", origins=frozenset({"https://app.example.com"}),
        hosts=frozenset(), loopback=False,
    )  # fmt: skip
    assert hdr.host_allowed(public, "mem.example.com")
    assert not hdr.host_allowed(public, "127.0.0.1:8080")
    assert hdr.base_url(public, "http", "whatever") == "https://mem.example.com"
    assert hdr.origin_allowed(public, "https://app.example.com", "https://mem.example.com")
    assert hdr.origin_allowed(public, "https://mem.example.com", "https://mem.example.com")
    anywhere = hdr.OriginPolicy(public_url=None, origins=frozenset(), hosts=frozenset(), loopback=False)
    assert hdr.host_allowed(anywhere, "10.0.0.5:8080")
    listed = hdr.OriginPolicy(
        public_url=None, origins=frozenset(), hosts=frozenset({"a.example"}), loopback=True
    )
    assert hdr.host_allowed(listed, "a.example:1") and not hdr.host_allowed(listed, "localhost:1")
