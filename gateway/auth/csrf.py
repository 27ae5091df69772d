"""CSRF protection for every form (``gw:signin``, ``sec:authz``).

Signed in, a form carries the session's synchroniser token (stored server-side with the session).
Before sign-in (the sign-in and sign-up forms), it carries the value of a random pre-session cookie
(HttpOnly, SameSite=Strict): a double-submit token another site can neither read nor set. Either way
:func:`check_csrf` also refuses a cross-site ``Origin`` when the browser sends one. SameSite cookies
are a second layer, not the only one.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from gateway.auth.accounts import cookie_name
from gateway.auth.sessions import context, current
from gateway.errors import CsrfFailed

FIELD = "csrf_token"
PRESESSION_COOKIE = "almanac_presession"


def _presession_cookie(request: Request) -> str:
    return cookie_name(PRESESSION_COOKIE, secure=context(request).policy.cookie_secure)


def csrf_token(request: Request) -> str:
    """The token to put in this request's forms (a hidden ``csrf_token`` field)."""
    session = current(request)
    if session is not None:
        return session.csrf
    existing = request.cookies.get(_presession_cookie(request))
    if existing:
        return existing
    if not hasattr(request.state, "new_presession"):
        request.state.new_presession = secrets.token_urlsafe(32)
    fresh: str = request.state.new_presession
    return fresh


def attach_presession(request: Request, response: Response) -> None:
    """Set the pre-session cookie on ``response`` if :func:`csrf_token` minted one for this request."""
    fresh: str | None = getattr(request.state, "new_presession", None)
    if fresh is None:
        return
    secure = context(request).policy.cookie_secure
    response.set_cookie(
        _presession_cookie(request), fresh, path="/", secure=secure, httponly=True, samesite="strict"
    )


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    own = urlsplit(context(request).policy.public_url or str(request.base_url))
    theirs = urlsplit(origin)
    return (theirs.scheme, theirs.netloc.lower()) == (own.scheme, own.netloc.lower())


async def check_csrf(request: Request, form: Mapping[str, object]) -> None:
    """Raise :class:`CsrfFailed` (403 ``csrf_failed``) unless ``form`` carries this browser's token
    and the request did not come from another origin."""
    sent = form.get(FIELD)
    session = current(request)
    expected = session.csrf if session is not None else request.cookies.get(_presession_cookie(request))
    if not _same_origin(request):
        raise CsrfFailed("this form was sent from another site; open the page here and submit it again")
    if not isinstance(sent, str) or not expected or not hmac.compare_digest(sent, expected):
        raise CsrfFailed("the form's security token is missing or stale; reload the page and submit it again")
