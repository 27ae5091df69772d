"""Clients and their redirect URIs: who may ask for a grant, and where the answer may go.

Redirect URIs must be ``https``, ``http`` on a loopback address (RFC 8252 §7.3), or a private-use
scheme of a native app (``cursor://…``); never with a fragment. A requested ``redirect_uri`` must
equal a registered one exactly — except that on a loopback address any port matches, since native
apps listen on an ephemeral one. Anything else is refused *without* redirecting (no open redirect).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError, OAuthClientInformationFull
from pydantic import AnyUrl

from gateway.auth.oauth.config import SCOPES_SUPPORTED

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_FORBIDDEN_SCHEMES = frozenset(
    {"javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"}
)


class RedirectUriRefused(ValueError):
    """A redirect URI that may not be registered; the message says why."""


def check_redirect_uri(uri: str) -> str:
    """``uri`` if it may be registered, else :class:`RedirectUriRefused`."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or scheme in _FORBIDDEN_SCHEMES:
        raise RedirectUriRefused(f"redirect URI {uri!r} must be https, loopback http, or an app's own scheme")
    if parts.fragment or "#" in uri:
        raise RedirectUriRefused(f"redirect URI {uri!r} must not have a fragment")
    if scheme == "http" and (parts.hostname or "") not in LOOPBACK:
        raise RedirectUriRefused(f"redirect URI {uri!r} uses plain http on a non-loopback host; use https")
    if scheme in ("http", "https") and not parts.hostname:
        raise RedirectUriRefused(f"redirect URI {uri!r} has no host")
    return uri


def redirect_matches(registered: str, requested: str) -> bool:
    """Exact match, except that the port is ignored on loopback http redirect URIs."""
    if registered == requested:
        return True
    a, b = urlsplit(registered), urlsplit(requested)
    if a.scheme != "http" or b.scheme != "http" or (a.hostname or "") not in LOOPBACK:
        return False
    return (a.hostname, a.path, a.query, a.username, a.password) == (
        b.hostname,
        b.path,
        b.query,
        b.username,
        b.password,
    ) and not b.fragment


class Client(OAuthClientInformationFull):
    """A known client, with this server's redirect-URI and scope rules."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        registered = [str(u) for u in self.redirect_uris or []]
        if redirect_uri is None:
            if len(registered) == 1:
                return AnyUrl(registered[0])
            raise InvalidRedirectUriError("redirect_uri is required: this client registered several")
        if any(redirect_matches(r, str(redirect_uri)) for r in registered):
            return redirect_uri
        raise InvalidRedirectUriError(
            f"redirect_uri {str(redirect_uri)!r} is not one this client registered; nothing was redirected"
        )

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        if requested_scope is None:
            return None
        scopes = requested_scope.split()
        unknown = [s for s in scopes if s not in SCOPES_SUPPORTED]
        if unknown:
            raise InvalidScopeError(
                f"unknown scope {' '.join(unknown)}; this server offers {' '.join(SCOPES_SUPPORTED)}"
            )
        return scopes


def display_name(client: OAuthClientInformationFull) -> str:
    """What the consent page calls the client: its own name, else the host of its client ID."""
    if client.client_name and client.client_name.strip():
        return client.client_name.strip()[:100]
    host = urlsplit(client.client_id).hostname
    return host or "An MCP client"


def redirect_host(uri: str) -> str:
    parts = urlsplit(uri)
    return parts.netloc or f"{parts.scheme}:"
