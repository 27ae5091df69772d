"""``/reset/<secret>``: set a new password from a one-time link the operator gave the owner
(``almanac owner reset-link EMAIL``; ``gw:signin``).

GET shows the form while the link is live (else a page saying it is not, and what to do); POST
checks the CSRF token, then the password rules (:mod:`gateway.auth.passwords`, the same as the CLI
and sign-up), then spends the link — once: a second use, or one after it expired, is refused and
changes nothing. Using it ends every session the owner had. Every outcome is an audit event
(``password.reset`` / ``password.reset_refused``). The secret in the path never leaves the page
(``Referrer-Policy: strict-origin``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.auth import passwords
from gateway.auth.csrf import check_csrf
from gateway.auth.sessions import context, remote_of
from gateway.control.passwords import LINK_INVALID
from gateway.errors import GatewayError, InvalidPassword, ResetLinkInvalid
from gateway.web.render import render

_MAX_FIELD = 2048
#: A reset link's secret is ``secrets.token_urlsafe(32)``: 43 characters of [A-Za-z0-9_-].
_MAX_SECRET = 128


def _page(request: Request, status_code: int = 200, **values: Any) -> Response:
    values.setdefault("error", None)
    values.setdefault("info", None)
    values.setdefault("done", False)
    values.setdefault("email", None)
    response = render(
        request,
        "password_reset.html",
        status_code=status_code,
        min_password=passwords.MIN_PASSWORD,
        max_password=passwords.MAX_PASSWORD,
        **values,
    )
    # the origin alone, never the path with the secret (no-referrer would make browsers send
    # ``Origin: null`` with the form, which the CSRF check rightly refuses)
    response.headers["Referrer-Policy"] = "strict-origin"
    return response


def _invalid(request: Request) -> Response:
    return _page(request, status_code=ResetLinkInvalid.status, invalid=True, error=LINK_INVALID)


async def reset(request: Request) -> Response:
    secret = str(request.path_params["secret"])[:_MAX_SECRET]
    store = context(request).store
    if request.method == "GET":
        link = store.passwords.reset_link(secret)
        if link is None:
            return _invalid(request)
        return _page(request, invalid=False, email=link.email, action=request.url.path)
    form = await request.form()
    await check_csrf(request, form)

    def field(name: str) -> str:
        value = form.get(name)
        return value[:_MAX_FIELD] if isinstance(value, str) else ""

    link = store.passwords.reset_link(secret)
    if link is None:
        store.passwords.refuse_reset_link(secret, remote=remote_of(request))
        return _invalid(request)
    try:
        password = passwords.check_new_password(field("password"), field("confirm"))
    except InvalidPassword as exc:
        return _page(
            request, exc.status, invalid=False, email=link.email, action=request.url.path, error=exc.message
        )
    try:
        store.passwords.use_reset_link(secret, passwords.hash_password(password), remote=remote_of(request))
    except GatewayError:
        return _invalid(request)
    return _page(request, invalid=False, done=True, email=link.email, info="Your new password is set.")


def routes() -> list[BaseRoute]:
    return [Route("/reset/{secret}", reset, methods=["GET", "POST"])]
