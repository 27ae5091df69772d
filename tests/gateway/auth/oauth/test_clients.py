"""Redirect URIs: what may be registered and what matches (exactly; any port on loopback)."""

from __future__ import annotations

import pytest
from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError
from pydantic import AnyUrl

from gateway.auth.oauth.clients import (
    Client,
    RedirectUriRefused,
    check_redirect_uri,
    display_name,
    redirect_matches,
)


@pytest.mark.req("gw:oauth")
@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai/api/mcp/auth_callback",
        "http://127.0.0.1:33418/callback",
        "http://localhost/cb",
        "http://[::1]:8080/cb",
        "cursor://anysphere.cursor-mcp/oauth/callback",
    ],
)
def test_acceptable_redirect_uris(uri: str) -> None:
    assert check_redirect_uri(uri) == uri


@pytest.mark.req("gw:oauth", "sec:authz")
@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("http://evil.example/cb", "plain http"),
        ("https://claude.ai/cb#frag", "fragment"),
        ("javascript:alert(1)", "https, loopback http"),
        ("data:text/html,hi", "https, loopback http"),
        ("https:///nohost", "no host"),
    ],
)
def test_refused_redirect_uris(uri: str, why: str) -> None:
    with pytest.raises(RedirectUriRefused, match=why):
        check_redirect_uri(uri)


@pytest.mark.req("gw:oauth", "sec:authz")
def test_redirect_uris_match_exactly_except_the_loopback_port() -> None:
    assert redirect_matches("http://127.0.0.1/callback", "http://127.0.0.1:51234/callback")
    assert redirect_matches("http://localhost:3000/cb", "http://localhost:4000/cb")
    assert not redirect_matches("http://127.0.0.1/callback", "http://127.0.0.1:5/other")
    assert not redirect_matches("http://127.0.0.1/callback", "http://localhost/callback")
    assert not redirect_matches(
        "https://claude.ai/api/mcp/auth_callback", "https://claude.ai/api/mcp/auth_callback/"
    )
    assert not redirect_matches("https://claude.ai/cb", "https://claude.ai:444/cb")
    assert not redirect_matches("https://claude.ai/cb", "https://claude.ai/cb?next=https://evil.example")
    assert not redirect_matches("https://claude.ai/cb", "https://claude.ai.evil.example/cb")


@pytest.mark.req("gw:oauth", "sec:authz")
def test_a_client_refuses_unregistered_redirects_and_unknown_scopes() -> None:
    client = Client(client_id="dcr_1", redirect_uris=[AnyUrl("http://127.0.0.1:9/cb")], client_name="Claude")
    assert (
        str(client.validate_redirect_uri(AnyUrl("http://127.0.0.1:40000/cb"))) == "http://127.0.0.1:40000/cb"
    )
    assert str(client.validate_redirect_uri(None)) == "http://127.0.0.1:9/cb"
    with pytest.raises(InvalidRedirectUriError, match="not one this client registered"):
        client.validate_redirect_uri(AnyUrl("https://evil.example/cb"))
    assert client.validate_scope("memory offline_access") == ["memory", "offline_access"]
    with pytest.raises(InvalidScopeError, match="admin"):
        client.validate_scope("memory admin")
    assert display_name(client) == "Claude"
    assert display_name(Client(client_id="https://app.example.com/oauth/client.json")) == "app.example.com"
