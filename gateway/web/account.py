"""The account pages (``gw:signin``): ``/`` (signed-in home), ``/login``, ``/signup``, ``/logout``.

Every POST checks its CSRF token first. A refused form is shown again with what to fix and nothing
changed. Sign-in is throttled per account and per address; every outcome is an audit event
(``signin.success`` / ``signin.failure`` / ``signin.throttled``, ``signup``, ``signout``).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.auth import accounts, passwords
from gateway.auth.csrf import check_csrf
from gateway.auth.limits import Refused
from gateway.auth.passwords import hash_password, verify_password
from gateway.auth.sessions import (
    clear_session_cookie,
    context,
    current,
    login_redirect,
    remote_of,
    set_session_cookie,
)
from gateway.control.accounts import account_key
from gateway.control.tokens import validate_email
from gateway.errors import (
    AlreadyExists,
    BadRequest,
    GatewayError,
    OwnerNotFound,
    SignupClosed,
    WorkspaceLost,
    WorkspaceRestoring,
)
from gateway.web.lost import conditions, lost_page
from gateway.web.render import render

_MAX_FIELD = 2048


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value[:_MAX_FIELD] if isinstance(value, str) else ""


@cache
def _decoy_hash() -> str:
    """Checked against when the email is unknown, so a miss takes as long as a wrong password."""
    return hash_password("almanac decoy password")


def mcp_url(request: Request) -> str:
    base = context(request).policy.public_url or str(request.base_url)
    return base.rstrip("/") + "/mcp"


def _oidc_name(request: Request) -> str | None:
    policy = context(request).policy
    return policy.oidc_name if policy.oidc_enabled else None


def _login_page(request: Request, status_code: int = 200, **values: Any) -> Response:
    values.setdefault("next", accounts.safe_next(request.query_params.get("next")))
    values.setdefault("email", "")
    values.setdefault("error", None)
    values.setdefault("info", None)
    return render(
        request,
        "login.html",
        status_code=status_code,
        signup=context(request).policy.signup,
        oidc_name=_oidc_name(request),
        **values,
    )


def _signup_page(request: Request, status_code: int = 200, **values: Any) -> Response:
    values.setdefault("next", accounts.safe_next(request.query_params.get("next")))
    values.setdefault("email", "")
    values.setdefault("invite", request.query_params.get("invite", ""))
    values.setdefault("error", None)
    values.setdefault("info", None)
    return render(
        request,
        "signup.html",
        status_code=status_code,
        signup=context(request).policy.signup,
        oidc_name=_oidc_name(request),
        min_password=passwords.MIN_PASSWORD,
        **values,
    )


def _too_fast(request: Request, refused: Refused, **values: Any) -> Response:
    """The sign-in page again, 429 with ``Retry-After``: this address is over its request rate."""
    error = refused.message[0].upper() + refused.message[1:] + "."
    response = _login_page(request, status_code=429, error=error, **values)
    response.headers["Retry-After"] = str(refused.retry_after)
    return response


def signed_in_response(request: Request, owner_id: str, next_path: str, *, method: str) -> Response:
    """Start a session for ``owner_id`` (audited) and send the browser on to ``next_path``."""
    ctx = context(request)
    _session, secret = ctx.store.accounts.create_session(
        owner_id,
        max_age=ctx.policy.session_max_age,
        remote=remote_of(request),
        user_agent=request.headers.get("user-agent", "")[:300] or None,
        method=method,
    )
    response = RedirectResponse(accounts.safe_next(next_path), status_code=303)
    set_session_cookie(response, request, secret)
    return response


async def home(request: Request) -> Response:
    session = current(request)
    if session is None:
        return login_redirect(request)
    store = context(request).store
    counts: dict[str, int] = {}
    for connection in store.connections.of_owner(session.owner_id):
        counts[connection.workspace_id] = counts.get(connection.workspace_id, 0) + 1
    workspaces = store.owners.workspaces(session.owner_id)
    return render(
        request,
        "home.html",
        mcp_url=mcp_url(request),
        data_dir=request.app.state.components.settings.data_dir,
        workspaces=workspaces,
        connections=counts,
        conditions=conditions(store, workspaces),
    )


async def login(request: Request) -> Response:
    if request.method == "GET":
        next_path = accounts.safe_next(request.query_params.get("next"))
        if current(request) is not None:
            return RedirectResponse(next_path, status_code=303)
        info = "You are signed out." if request.query_params.get("signed_out") else None
        erased = request.query_params.get("erased")
        if erased:
            info = (
                "Your account and all its workspaces were erased."
                if erased == "1"
                else "Your account is closed; some of its files could not be deleted yet and the "
                "operator has been told."
            )
        return _login_page(request, info=info)
    form = await request.form()
    await check_csrf(request, form)
    ctx = context(request)
    email, password = _field(form, "email").strip(), _field(form, "password")
    next_path = accounts.safe_next(_field(form, "next"))
    remote = remote_of(request)
    if refused := ctx.limits.check("signin", remote):
        return _too_fast(request, refused, email=email, next=next_path)
    own_key, address_key = account_key(email), accounts.address_key(remote)
    pair_key = accounts.pair_key(email, remote)
    limits = ctx.policy.throttle
    owner = None
    try:
        owner = ctx.store.owners.by_email(email) if email else None
    except OwnerNotFound:
        owner = None
    owner_id = owner.id if owner else None
    account_failures = ctx.store.accounts.login_failures(own_key, window=limits.window)
    over = accounts.throttled(
        limits,
        pair_failures=ctx.store.accounts.login_failures(pair_key, window=limits.window),
        address_failures=ctx.store.accounts.login_failures(address_key, window=limits.window),
        account_failures=account_failures,
        known_address=account_failures >= limits.per_account_total
        and owner is not None
        and ctx.store.accounts.signed_in_from(owner.id, remote, within=accounts.KNOWN_ADDRESS_AGE),
    )
    if over is not None:
        ctx.store.audit_log.record(
            "signin.throttled", owner_id=owner_id, remote=remote, detail={"email": email, "limit": over}
        )
        minutes = max(1, math.ceil(limits.window / 60))
        whose = {
            "account": "for this account from your address",
            "address": "from your address",
            "account_total": "for this account",
        }[over]
        return _login_page(
            request,
            status_code=429,
            email=email,
            next=next_path,
            error=f"Too many failed sign-ins {whose}. Wait up to {minutes} minutes, then try again.",
        )
    stored = ctx.store.owners.password_hash(owner.id) if owner else None
    ok = verify_password(stored or _decoy_hash(), password) and stored is not None
    if not ok:
        reason = (
            "no such owner" if owner is None else "no password set" if stored is None else "wrong password"
        )
        ctx.store.accounts.forget_login_failures(older_than=limits.window)
        ctx.store.accounts.record_login_failure(
            (pair_key, address_key, own_key),
            owner_id=owner_id,
            remote=remote,
            detail={"email": email, "reason": reason},
        )
        return _login_page(
            request,
            status_code=400,
            email=email,
            next=next_path,
            error="That email and password do not match an account. Check both and try again.",
        )
    assert owner is not None
    ctx.store.accounts.clear_login_failures(pair_key)
    return signed_in_response(request, owner.id, next_path, method="password")


async def signup(request: Request) -> Response:
    ctx = context(request)
    if request.method == "GET":
        if current(request) is not None:
            return RedirectResponse(accounts.safe_next(request.query_params.get("next")), status_code=303)
        return _signup_page(request, status_code=403 if ctx.policy.signup == "closed" else 200)
    form = await request.form()
    await check_csrf(request, form)
    if refused := ctx.limits.check("signin", remote_of(request)):
        response = _signup_page(
            request, status_code=429, error=refused.message[0].upper() + refused.message[1:]
        )
        response.headers["Retry-After"] = str(refused.retry_after)
        return response
    if ctx.policy.signup == "closed":
        raise SignupClosed("sign-up is closed here; ask the operator to create your account")
    email, invite = _field(form, "email").strip(), _field(form, "invite").strip()
    next_path = accounts.safe_next(_field(form, "next"))
    try:
        email = validate_email(email)
        password = passwords.check_new_password(_field(form, "password"), _field(form, "confirm"))
        if ctx.policy.signup == "invite" and not invite:
            raise BadRequest("sign-up here needs an invite code; ask the operator for one")
        owner = ctx.store.accounts.sign_up(
            email,
            hash_password(password),
            invite=invite if ctx.policy.signup == "invite" else None,
            remote=remote_of(request),
            method="password",
        )
    except AlreadyExists:
        return _signup_page(
            request,
            status_code=409,
            email=email,
            invite=invite,
            next=next_path,
            error="An account with this email already exists. Sign in instead.",
        )
    except GatewayError as exc:
        return _signup_page(
            request, status_code=exc.status, email=email, invite=invite, next=next_path, error=exc.message
        )
    return signed_in_response(request, owner.id, next_path, method="signup")


async def logout(request: Request) -> Response:
    form = await request.form()
    await check_csrf(request, form)
    session = current(request)
    if session is not None:
        context(request).store.accounts.end_session(session, remote=remote_of(request))
    response = RedirectResponse("/login?signed_out=1", status_code=303)
    clear_session_cookie(response, request)
    return response


def error_page(request: Request, exc: GatewayError) -> Response:
    """A refusal as a page, for a browser (the JSON envelope stays for API clients)."""
    if isinstance(exc, WorkspaceLost | WorkspaceRestoring):
        return lost_page(request, exc)
    titles = {
        403: "Not allowed",
        404: "Not found",
        410: "This workspace's node was lost",
        429: "Too many requests",
        503: "Not available right now",
    }
    response = render(
        request,
        "error.html",
        status_code=exc.status,
        title=titles.get(exc.status, "Something went wrong"),
        message=exc.message,
        back=request.url.path if request.method == "POST" else "/",
    )
    response.headers.update(exc.headers())
    return response


def routes() -> list[BaseRoute]:
    return [
        Route("/", home, methods=["GET"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/signup", signup, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
