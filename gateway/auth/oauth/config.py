"""What the authorization server is configured with, and what every endpoint shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway import headers as hdr
from gateway.auth.limits import AddressLimits, Kind
from gateway.control.records import TokenLifetimes
from gateway.control.store import ControlPlane
from gateway.errors import HostNotAllowed

SCOPE = "memory"
SCOPES_SUPPORTED = (SCOPE, "offline_access")
CONSENT_TTL = 600.0


@dataclass(frozen=True)
class CimdPolicy:
    """How client ID metadata documents are fetched."""

    timeout: float
    max_bytes: int
    allow_private: bool


@dataclass(frozen=True)
class OAuthConfig:
    lifetimes: TokenLifetimes
    code_ttl: float
    unused_client_ttl: float
    cimd: CimdPolicy
    max_unused_clients: int = 10_000


@dataclass(frozen=True)
class OAuthServer:
    """The authorization server's shared parts (built once by the composition root)."""

    store: ControlPlane
    config: OAuthConfig
    origin_policy: hdr.OriginPolicy
    clock: Callable[[], float]
    limits: AddressLimits

    def issuer(self, request: Request) -> str:
        """This server's issuer (and base URL): ``public_url``, else the origin the request reached.
        A ``Host`` this gateway does not serve is refused."""
        host = request.headers.get("host")
        if not hdr.host_allowed(self.origin_policy, host):
            raise HostNotAllowed(f"host {host!r} is not served here")
        return hdr.base_url(self.origin_policy, request.url.scheme, host)

    def resource(self, request: Request) -> str:
        """The one protected resource (RFC 8707 / RFC 9728): the ``/mcp`` URL."""
        return self.issuer(request) + "/mcp"


def remote_of(request: Request) -> str | None:
    return request.client.host if request.client else None


def over_limit(server: OAuthServer, kind: Kind, request: Request) -> Response | None:
    """429 with ``Retry-After`` (an OAuth error body) when this address is over ``kind``'s limit."""
    refused = server.limits.check(kind, remote_of(request))
    if refused is None:
        return None
    body = {"error": "rate_limited", "error_description": refused.message}
    headers = {"Retry-After": str(refused.retry_after), "Cache-Control": "no-store"}
    return JSONResponse(body, status_code=429, headers=headers)
