"""Browser sessions (``gw:signin``): a random secret in an HttpOnly, SameSite=Lax cookie (Secure
and ``__Host-`` prefixed unless served over plain http on this machine); the server keeps only its
hash, in the control plane's ``sessions`` table, so signing out ends it everywhere at once.

Pages call :func:`signed_in` (the current :class:`Session` or None) and, when None,
:func:`login_redirect` (303 to ``/login?next=<this path>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gateway.auth.accounts import AccountPolicy, cookie_name, safe_next
from gateway.auth.limits import AddressLimits
from gateway.control.records import Session
from gateway.control.store import ControlPlane

__all__ = [
    "AccountContext",
    "Session",
    "clear_session_cookie",
    "context",
    "current",
    "login_redirect",
    "remote_of",
    "set_session_cookie",
    "signed_in",
]

SESSION_COOKIE = "almanac_session"


@dataclass(frozen=True)
class AccountContext:
    """What the account pieces need, put on ``app.state.accounts`` by the composition root."""

    store: ControlPlane
    policy: AccountPolicy
    limits: AddressLimits


def context(request: Request) -> AccountContext:
    found = getattr(request.app.state, "accounts", None)
    if not isinstance(found, AccountContext):  # pragma: no cover - a wiring bug
        raise RuntimeError("app.state.accounts is not set; build the app with gateway.app.create_app")
    return found


def remote_of(request: Request) -> str | None:
    return request.client.host if request.client else None


def current(request: Request) -> Session | None:
    """The signed-in session of this request, looked up once and remembered on ``request.state``."""
    if hasattr(request.state, "session"):
        cached: Session | None = request.state.session
        return cached
    ctx = context(request)
    secret = request.cookies.get(cookie_name(SESSION_COOKIE, secure=ctx.policy.cookie_secure))
    session = ctx.store.accounts.session_by_secret(secret) if secret else None
    request.state.session = session
    return session


async def signed_in(request: Request) -> Session | None:
    """The signed-in owner's session, or None (looked up on a worker thread, not the event loop)."""
    if hasattr(request.state, "session"):
        return current(request)
    return await anyio.to_thread.run_sync(current, request)


def login_redirect(request: Request) -> RedirectResponse:
    """303 to the sign-in page, which comes back here (this path and query) once signed in."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/login?" + urlencode({"next": safe_next(here)}), status_code=303)


def set_session_cookie(response: Response, request: Request, secret: str) -> None:
    policy = context(request).policy
    response.set_cookie(
        cookie_name(SESSION_COOKIE, secure=policy.cookie_secure),
        secret,
        max_age=int(policy.session_max_age),
        path="/",
        secure=policy.cookie_secure,
        httponly=True,
        samesite="lax",
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    policy = context(request).policy
    response.delete_cookie(
        cookie_name(SESSION_COOKIE, secure=policy.cookie_secure),
        path="/",
        secure=policy.cookie_secure,
        httponly=True,
        samesite="lax",
    )
