"""Pure rules of owner accounts on the web (``gw:signin``): who may sign up, when sign-in is
throttled, where a sign-in may send the browser next, how cookies are set.

No I/O here; :mod:`gateway.web.account` applies these rules to requests and the control plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

SignupMode = Literal["open", "invite", "closed"]
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class ThrottlePolicy:
    """At most ``per_account`` failed sign-ins for one email and ``per_address`` from one client
    address within ``window`` seconds; past either, sign-in is refused (even with the right password)
    until the window has moved on."""

    per_account: int
    per_address: int
    window: float


@dataclass(frozen=True)
class AccountPolicy:
    signup: SignupMode
    cookie_secure: bool
    session_max_age: float
    throttle: ThrottlePolicy
    public_url: str | None = None
    oidc_enabled: bool = False
    oidc_name: str = "single sign-on"


def account_key(email: str) -> str:
    return "account:" + email.strip().lower()


def address_key(remote: str | None) -> str:
    return "address:" + (remote or "unknown")


def throttled(policy: ThrottlePolicy, *, account_failures: int, address_failures: int) -> str | None:
    """Which limit this sign-in attempt is over (``"account"`` or ``"address"``), or None."""
    if account_failures >= policy.per_account:
        return "account"
    if address_failures >= policy.per_address:
        return "address"
    return None


def safe_next(candidate: str | None, default: str = "/") -> str:
    """``candidate`` if it is a path on this site (``/…``), else ``default`` — never another origin
    (``//evil.example``, ``/\\evil.example``, ``https://…``, control characters)."""
    if not candidate or not candidate.startswith("/") or candidate.startswith(("//", "/\\")):
        return default
    if any(ord(c) < 32 or ord(c) == 127 or c == "\\" for c in candidate):
        return default
    parts = urlsplit(candidate)
    if parts.scheme or parts.netloc:
        return default
    return candidate


def default_cookie_secure(public_url: str | None, host: str) -> bool:
    """Cookies are ``Secure`` unless the gateway is reached over plain http on this machine."""
    if public_url:
        parts = urlsplit(public_url)
        return not (parts.scheme == "http" and (parts.hostname or "") in _LOCAL_HOSTS)
    return host not in (*_LOCAL_HOSTS, "0.0.0.0", "::", "")


def cookie_name(base: str, *, secure: bool) -> str:
    """``__Host-`` prefixed when Secure: the browser then refuses it from a sibling domain or path."""
    return f"__Host-{base}" if secure else base
