"""Pure header rules of the proxy (``gw:route``; the identity headers are ``docs/wire.md``'s).

Requests: only an allowlist goes upstream; ``Authorization`` and every client-sent ``X-Almanac-*``
never do; the gateway adds the identity headers. Responses: an allowlist comes back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote, urlsplit

RawHeaders = list[tuple[bytes, bytes]]


class Caller(Protocol):
    """Who is calling, as the identity headers say it: what this module needs of a
    :class:`~gateway.control.store.Principal` (a leaf module imports no layer above it)."""

    @property
    def connection_id(self) -> str: ...

    @property
    def connection_name(self) -> str: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def scope(self) -> str | None: ...

    @property
    def reads_unscoped(self) -> bool: ...


REQUEST_ALLOW = frozenset(
    {
        b"accept",
        b"content-type",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"last-event-id",
        b"mcp-method",
        b"mcp-name",
    }
)
REQUEST_ALLOW_PREFIXES = (b"mcp-param-",)
RESPONSE_ALLOW = frozenset(
    {
        b"content-type",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"cache-control",
        b"x-accel-buffering",
        b"allow",
        b"retry-after",
    }
)
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def get(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def identity(principal: Caller) -> RawHeaders:
    """The internal headers that tell the engine who is calling."""
    found = [
        (b"x-almanac-connection", quote(principal.connection_name, safe="").encode("ascii")),
        (b"x-almanac-connection-id", principal.connection_id.encode("ascii")),
        (b"x-almanac-read-only", b"1" if principal.read_only else b"0"),
    ]
    if principal.scope is not None:
        found.append((b"x-almanac-scope", principal.scope.encode("ascii")))
        found.append((b"x-almanac-scope-unscoped", b"1" if principal.reads_unscoped else b"0"))
    return found


def upstream_request(headers: Iterable[tuple[bytes, bytes]], principal: Caller) -> RawHeaders:
    kept = [
        (key.lower(), value)
        for key, value in headers
        if key.lower() in REQUEST_ALLOW or key.lower().startswith(REQUEST_ALLOW_PREFIXES)
    ]
    return [*kept, (b"host", b"localhost"), *identity(principal)]


def downstream_response(headers: Iterable[tuple[bytes, bytes]]) -> RawHeaders:
    kept = [(key.lower(), value) for key, value in headers if key.lower() in RESPONSE_ALLOW]
    content_type = get(kept, b"content-type") or ""
    if content_type.startswith("text/event-stream") and get(kept, b"x-accel-buffering") is None:
        kept.append((b"x-accel-buffering", b"no"))
    return kept


@dataclass(frozen=True)
class OriginPolicy:
    """Which ``Host`` and ``Origin`` values the gateway accepts.

    ``hosts`` empty means: the public URL's host when one is configured, and loopback names when
    the gateway listens on loopback; otherwise any host. An ``Origin`` (browsers send one) must be
    the gateway's own origin or listed in ``origins``."""

    public_url: str | None
    origins: frozenset[str]
    hosts: frozenset[str]
    loopback: bool


def host_name(host_header: str) -> str:
    """``example.com:8080`` → ``example.com``; ``[::1]:80`` → ``[::1]``."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def host_allowed(policy: OriginPolicy, host_header: str | None) -> bool:
    if host_header is None:
        return False
    name = host_name(host_header.strip().lower())
    allowed = set(policy.hosts)
    if not allowed:
        if policy.public_url:
            allowed.add((urlsplit(policy.public_url).hostname or "").lower())
        if policy.loopback:
            allowed |= LOOPBACK_HOSTS
        if not allowed:
            return True
    return name in allowed or name.strip("[]") in allowed


def base_url(policy: OriginPolicy, scheme: str, host_header: str | None) -> str:
    """The gateway's own base URL: the configured public URL, else what this request reached."""
    if policy.public_url:
        return policy.public_url.rstrip("/")
    return f"{scheme}://{host_header or 'localhost'}"


def origin_allowed(policy: OriginPolicy, origin: str | None, own_base: str) -> bool:
    if origin is None:
        return True  # not a browser: nothing to rebind
    origin = origin.strip().rstrip("/").lower()
    if origin in {o.rstrip("/").lower() for o in policy.origins}:
        return True
    own = urlsplit(own_base)
    return origin == f"{own.scheme}://{own.netloc}".lower()
