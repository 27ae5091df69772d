"""Sign-in through an upstream OpenID Connect provider (``gw:signin``), with authlib's Starlette
client: authorization code + PKCE S256, ``state`` and ``nonce``, the ID token's signature, issuer,
audience and expiry checked against the provider's discovery document and keys.

The flow's temporary data (state, nonce, PKCE verifier) is kept server-side, in this process, keyed
by a random, HttpOnly, SameSite=Lax cookie set when the flow starts — so the provider's redirect
back (a cross-site navigation) carries it, and a callback in any other browser finds nothing.

Who the person is: an owner already linked to (issuer, subject); else the owner whose email the
provider says is verified (the identity is then linked); else, when sign-up is open, a new owner.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from authlib.integrations.base_client import OAuthError
from authlib.integrations.starlette_client import OAuth
from joserfc.errors import JoseError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.auth.accounts import cookie_name, safe_next
from gateway.auth.sessions import context, remote_of
from gateway.errors import AlreadyExists, Forbidden, OwnerNotFound
from gateway.web.account import error_page, signed_in_response

FLOW_COOKIE = "almanac_oidc"
FLOW_TTL = 600.0
_MAX_FLOWS = 10_000
_NAME = "upstream"


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    client_secret: str


class SignInRefused(Forbidden):
    code = "oidc_signin_refused"


class _Flows:
    """Browser-bound temporary data of flows in progress (bounded; entries expire)."""

    def __init__(self) -> None:
        self._flows: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()

    def new(self) -> tuple[str, dict[str, Any]]:
        self._expire()
        key, data = secrets.token_urlsafe(32), dict[str, Any]()
        self._flows[key] = (time.monotonic() + FLOW_TTL, data)
        while len(self._flows) > _MAX_FLOWS:
            self._flows.popitem(last=False)
        return key, data

    def take(self, key: str | None) -> dict[str, Any] | None:
        self._expire()
        found = self._flows.pop(key, None) if key else None
        return found[1] if found else None

    def _expire(self) -> None:
        now = time.monotonic()
        while self._flows and next(iter(self._flows.values()))[0] < now:
            self._flows.popitem(last=False)


def routes(config: OidcConfig) -> list[BaseRoute]:
    oauth = OAuth()
    oauth.register(
        _NAME,
        client_id=config.client_id,
        client_secret=config.client_secret,
        server_metadata_url=config.issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={"scope": "openid email profile", "code_challenge_method": "S256", "timeout": 10},
    )
    client: Any = oauth.create_client(_NAME)
    flows = _Flows()

    def callback_url(request: Request) -> str:
        base = context(request).policy.public_url or str(request.base_url).rstrip("/")
        return base + "/login/oidc/callback"

    def flow_cookie(request: Request) -> str:
        return cookie_name(FLOW_COOKIE, secure=context(request).policy.cookie_secure)

    async def start(request: Request) -> Response:
        key, data = flows.new()
        data["next"] = safe_next(request.query_params.get("next"))
        request.scope["session"] = data
        try:
            response: Response = await client.authorize_redirect(request, callback_url(request))
        except Exception as exc:  # the provider is down or its discovery document is bad
            flows.take(key)
            return error_page(
                request, SignInRefused(f"the sign-in provider could not be reached ({exc}); try again later")
            )
        secure = context(request).policy.cookie_secure
        response.set_cookie(
            flow_cookie(request),
            key,
            max_age=int(FLOW_TTL),
            path="/",
            secure=secure,
            httponly=True,
            samesite="lax",
        )
        return response

    async def callback(request: Request) -> Response:
        ctx = context(request)
        data = flows.take(request.cookies.get(flow_cookie(request)))
        if data is None:
            return error_page(
                request,
                SignInRefused("this sign-in link has expired or was opened in another browser; start again"),
            )
        request.scope["session"] = data
        try:
            token = await client.authorize_access_token(request)
        except (OAuthError, JoseError, ValueError) as exc:
            ctx.store.audit_log.record(
                "signin.failure", remote=remote_of(request), detail={"method": "oidc", "reason": str(exc)}
            )
            return error_page(request, SignInRefused(f"the sign-in provider's answer was refused: {exc}"))
        claims = token.get("userinfo") or {}
        issuer, subject = str(claims.get("iss", "")), str(claims.get("sub", ""))
        email = claims.get("email")
        verified = claims.get("email_verified") is True and isinstance(email, str)
        owner_id = _owner_for(request, issuer, subject, email if verified else None)
        if owner_id is None:
            ctx.store.audit_log.record(
                "signin.failure",
                remote=remote_of(request),
                detail={"method": "oidc", "reason": "no account", "issuer": issuer, "subject": subject},
            )
            why = (
                "sign-up is closed here, and no account is linked to that sign-in"
                if ctx.policy.signup != "open"
                else "the provider did not give a verified email address"
            )
            return error_page(request, SignInRefused(why + "; ask the operator for an account"))
        response = signed_in_response(request, owner_id, str(data.get("next", "/")), method="oidc")
        response.delete_cookie(flow_cookie(request), path="/", secure=ctx.policy.cookie_secure, httponly=True)
        return response

    return [
        Route("/login/oidc", start, methods=["GET"]),
        Route("/login/oidc/callback", callback, methods=["GET"]),
    ]


def _owner_for(request: Request, issuer: str, subject: str, verified_email: str | None) -> str | None:
    ctx = context(request)
    store = ctx.store
    if not issuer or not subject:
        return None
    try:
        return store.accounts.owner_by_identity(issuer, subject).id
    except OwnerNotFound:
        pass
    if verified_email is None:
        return None
    try:
        owner_id = store.owners.by_email(verified_email).id
    except OwnerNotFound:
        if ctx.policy.signup != "open":
            return None
        try:
            owner_id = store.accounts.sign_up(
                verified_email, None, invite=None, remote=remote_of(request), method="oidc"
            ).id
        except AlreadyExists:  # signed up in a race a moment ago
            owner_id = store.owners.by_email(verified_email).id
    store.accounts.link_identity(issuer, subject, owner_id, verified_email)
    return owner_id
