"""Clients and their redirect URIs: who may ask for a grant, and where the answer may go.

Redirect URIs must be ``https`` with a host, ``http`` on a loopback address (RFC 8252 §7.3), or a
private-use scheme of a native app written as a callback (``cursor://anysphere.cursor-mcp/…``,
``com.example.app:/oauth``, RFC 8252 §7.1); never with a fragment, user info, spaces or
backslashes. A scheme that belongs to a browser or to another protocol (``javascript:``,
``mailto:``, ``jar:``, ``view-source:``, ``chrome:``, ``file:``, …) is not an app's and is refused.
A requested ``redirect_uri`` must equal a registered one exactly — except that on a loopback
address any port matches, since native apps listen on an ephemeral one. Anything else is refused
*without* redirecting (no open redirect).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError, OAuthClientInformationFull
from pydantic import AnyUrl

from gateway.auth.oauth.config import SCOPES_SUPPORTED

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
#: Schemes that name a browser's own pages, a document, or another protocol: never an app's
#: callback. (An app's private-use scheme is its own name: ``cursor``, ``vscode``, ``com.example.app``.)
NOT_APP_SCHEMES = frozenset(
    {
        # script and documents
        "javascript", "vbscript", "data", "blob", "file", "filesystem", "jar", "view-source",
        # browsers' own pages and extensions
        "about", "chrome", "chrome-extension", "chrome-untrusted", "chrome-search", "chrome-error",
        "devtools", "edge", "brave", "opera", "vivaldi", "moz-extension", "resource", "moz-icon",
        "safari-extension", "safari-web-extension", "webkit-extension", "ms-browser-extension",
        "intent", "android-app", "content", "res", "wyciwyg", "googlechrome", "googlechromes",
        # other protocols
        "mailto", "tel", "sms", "mms", "fax", "ftp", "ftps", "sftp", "ssh", "telnet", "ws", "wss",
        "ldap", "ldaps", "news", "nntp", "snews", "irc", "ircs", "gopher", "xmpp", "sip", "sips",
        "smb", "nfs", "magnet", "geo", "urn", "market", "itms-services", "feed", "webcal",
    }
)  # fmt: skip


class RedirectUriRefused(ValueError):
    """A redirect URI that may not be registered; the message says why."""


def check_redirect_uri(uri: str) -> str:
    """``uri`` if it may be registered, else :class:`RedirectUriRefused`. Checked as written:
    parsers disagree on odd URLs, so anything odd is refused rather than read one way here and
    another way by the browser."""
    if any(ord(c) <= 32 or ord(c) == 127 or c == "\\" for c in uri):
        raise RedirectUriRefused(f"redirect URI {uri!r} must not contain spaces, control characters or '\\'")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or not _SCHEME.fullmatch(scheme) or scheme in NOT_APP_SCHEMES:
        raise RedirectUriRefused(f"redirect URI {uri!r} must be https, loopback http, or an app's own scheme")
    if parts.fragment or "#" in uri:
        raise RedirectUriRefused(f"redirect URI {uri!r} must not have a fragment")
    if "@" in parts.netloc:
        raise RedirectUriRefused(f"redirect URI {uri!r} must not carry user info ('…@')")
    if scheme in ("http", "https"):
        if not uri[len(scheme) :].startswith("://") or not parts.hostname or uri[len(scheme) + 3] == "/":
            raise RedirectUriRefused(f"redirect URI {uri!r} has no host")
        if scheme == "http" and parts.hostname not in LOOPBACK:
            raise RedirectUriRefused(
                f"redirect URI {uri!r} uses plain http on a non-loopback host; use https"
            )
    elif not (parts.netloc or parts.path.startswith("/")):
        raise RedirectUriRefused(
            f"redirect URI {uri!r} is not an app's callback: "
            f"write it as {scheme}://host/path or {scheme}:/path"
        )
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


def csp_source(uri: str) -> str:
    """The Content-Security-Policy source that allows navigating to redirect URI ``uri``: its
    origin (``https://claude.ai``, ``http://127.0.0.1:5173``), or for an app's own scheme the scheme
    (``cursor:``). ``uri`` has passed :func:`check_redirect_uri`, so it holds no quote or space."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https") and parts.hostname:
        return f"{scheme}://{parts.netloc.lower()}"
    return f"{scheme}:"
