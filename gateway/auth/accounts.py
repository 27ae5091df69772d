"""Pure rules of owner accounts on the web (``gw:signin``): who may sign up, when sign-in is
throttled, where a sign-in may send the browser next, how cookies are set.

No I/O here; :mod:`gateway.web.account` applies these rules to requests and the control plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from gateway.control.accounts import account_key

SignupMode = Literal["open", "invite", "closed"]
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


#: An address the owner signed in from this recently is theirs for the account-wide limit.
KNOWN_ADDRESS_AGE = 90 * 86400.0


@dataclass(frozen=True)
class ThrottlePolicy:
    """Failed sign-ins within ``window`` seconds, counted three ways (past any, sign-in is refused,
    even with the right password, until the window has moved on):

    - ``per_account`` for one email *from one address* — a stranger who knows the email locks out
      only themselves, never the owner signing in from elsewhere;
    - ``per_address`` from one address, across accounts (guessing many accounts);
    - ``per_account_total`` for one email from all addresses (guessing from many addresses); past
      it, addresses the owner has signed in from before may still try."""

    per_account: int
    per_address: int
    window: float
    per_account_total: int = 100


@dataclass(frozen=True)
class AccountPolicy:
    signup: SignupMode
    cookie_secure: bool
    session_max_age: float
    throttle: ThrottlePolicy
    public_url: str | None = None
    oidc_enabled: bool = False
    oidc_name: str = "single sign-on"


def address_key(remote: str | None) -> str:
    return "address:" + (remote or "unknown")


def pair_key(email: str, remote: str | None) -> str:
    """One email tried from one address (what ``per_account`` counts)."""
    return f"{account_key(email)}|{address_key(remote)}"


Limit = Literal["account", "address", "account_total"]


def throttled(
    policy: ThrottlePolicy,
    *,
    pair_failures: int,
    address_failures: int,
    account_failures: int,
    known_address: bool,
) -> Limit | None:
    """Which limit this sign-in attempt is over, or None. ``known_address``: the owner of the
    account has signed in from this address before."""
    if pair_failures >= policy.per_account:
        return "account"
    if address_failures >= policy.per_address:
        return "address"
    if account_failures >= policy.per_account_total and not known_address:
        return "account_total"
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
    """Cookies are ``Secure`` unless the gateway is reached over plain http on this machine: a
    ``public_url`` that is ``http://`` on a loopback name, or no ``public_url`` while listening on
    loopback only. Listening on every interface (``0.0.0.0``, the container default) they are
    ``Secure``: the gateway may be behind a TLS proxy, and browsers keep ``Secure`` cookies from
    ``http://localhost`` anyway (it counts as a secure origin)."""
    if public_url:
        parts = urlsplit(public_url)
        return not (parts.scheme == "http" and (parts.hostname or "") in _LOCAL_HOSTS)
    return host not in _LOCAL_HOSTS


def cookie_name(base: str, *, secure: bool) -> str:
    """``__Host-`` prefixed when Secure: the browser then refuses it from a sibling domain or path."""
    return f"__Host-{base}" if secure else base
