"""The SDK's ``OAuthAuthorizationServerProvider`` over the control plane, one per request (it needs
the request's issuer and, at ``/token``, the ``resource`` the client asked for).

Known clients come from the ``oauth_clients`` table; an https ``client_id`` is resolved as a client
ID metadata document (cached there). ``authorize`` parks the request and sends the browser to the
consent page; codes and tokens are the control plane's (:mod:`gateway.control.oauth`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl, ValidationError

from gateway.auth.oauth import cimd
from gateway.auth.oauth.clients import Client
from gateway.auth.oauth.config import CONSENT_TTL, SCOPE, SCOPES_SUPPORTED, OAuthServer
from gateway.control.records import IssuedTokens
from gateway.errors import InvalidGrant


@dataclass
class Provider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    server: OAuthServer
    issuer: str
    remote: str | None = None
    requested_resource: str | None = None

    @property
    def resource(self) -> str:
        return self.issuer + "/mcp"

    def _now(self) -> float:
        return self.server.clock()

    # -- clients ----------------------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        try:
            return await self.client(client_id)
        except cimd.CimdRefused:
            return None

    async def client(self, client_id: str) -> Client | None:
        """The client ``client_id`` names; :class:`cimd.CimdRefused` if its metadata document is bad."""
        now = self._now()
        record = self.server.store.oauth.client(client_id)
        if cimd.is_metadata_url(client_id) and (
            record is None or (record.expires_at is not None and record.expires_at <= now)
        ):
            doc = await cimd.fetch(client_id, self.server.config.cimd)
            self.server.store.oauth.save_client(
                client_id, "cimd", doc.metadata, now=now, expires_at=now + doc.cache_for
            )
            record = self.server.store.oauth.client(client_id)
        if record is None:
            return None
        try:
            return Client.model_validate({**record.metadata, "client_id": client_id})
        except ValidationError:
            return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:  # pragma: no cover
        raise NotImplementedError("registration is served by gateway.auth.oauth.register")

    # -- authorization ----------------------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is not None and params.resource.rstrip("/") != self.resource:
            raise AuthorizeError(
                "invalid_target", f"resource {params.resource!r} is not served here; use {self.resource!r}"
            )
        pending = {
            "state": params.state,
            "scopes": params.scopes or [SCOPE],
            "code_challenge": params.code_challenge,
            "redirect_uri": str(params.redirect_uri),
            "redirect_explicit": params.redirect_uri_provided_explicitly,
            "resource": self.resource,
        }
        now = self._now()
        self.server.store.oauth.collect_garbage(
            now=now, unused_client_age=self.server.config.unused_client_ttl
        )
        request_id = self.server.store.oauth.save_request(client.client_id, pending, now=now, ttl=CONSENT_TTL)
        return f"{self.issuer}/consent?request={request_id}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        record = self.server.store.oauth.code(authorization_code)
        if record is None or record.client_id != client.client_id:
            return None
        # The SDK compares expires_at with the wall clock; map our (injectable) clock onto it.
        remaining = record.expires_at - self._now()
        return AuthorizationCode(
            code=authorization_code,
            scopes=list(record.scopes),
            expires_at=time.time() + remaining if remaining > 0 else 0.0,
            client_id=record.client_id,
            code_challenge=record.code_challenge,
            redirect_uri=AnyUrl(record.redirect_uri),
            redirect_uri_provided_explicitly=record.redirect_explicit,
            resource=record.resource,
            subject=record.choice.owner_id,
        )

    def check_verifier(self, code: str, verifier: str) -> None:
        """Use ``code`` up when ``verifier`` does not match its PKCE challenge, before the SDK's
        handler refuses the request: a code gets one try, whoever sends it."""
        record = self.server.store.oauth.code(code)
        if record is None or record.used:
            return
        digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
        computed = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        if not hmac.compare_digest(computed, record.code_challenge):
            self.server.store.oauth.spend_code(
                code, now=self._now(), reason="wrong code_verifier", remote=self.remote
            )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self._check_resource(authorization_code.resource)
        try:
            issued = self.server.store.oauth.exchange_code(
                authorization_code.code,
                now=self._now(),
                lifetimes=self.server.config.lifetimes,
                remote=self.remote,
            )
        except InvalidGrant as exc:
            raise TokenError("invalid_grant", exc.message) from exc
        return _token(issued, authorization_code.scopes)

    # -- refresh and access tokens ----------------------------------------------------------------

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        record = self.server.store.oauth.refresh_token(refresh_token)
        if record is None or record.client_id != client.client_id:
            return None
        return RefreshToken(
            token=refresh_token,
            client_id=record.client_id,
            scopes=list(SCOPES_SUPPORTED),
            expires_at=None,  # checked (with our clock) when it is spent
            resource=record.resource,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self._check_resource(refresh_token.resource)
        try:
            issued = self.server.store.oauth.rotate_refresh(
                refresh_token.token,
                now=self._now(),
                lifetimes=self.server.config.lifetimes,
                remote=self.remote,
            )
        except InvalidGrant as exc:
            raise TokenError("invalid_grant", exc.message) from exc
        return _token(issued, [s for s in scopes if s != "offline_access"] or [SCOPE])

    async def load_access_token(self, token: str) -> AccessToken | None:
        record = self.server.store.oauth.access_token(token, now=self._now())
        if record is None:
            return None
        return AccessToken(
            token=token,
            client_id=record.client_id,
            scopes=[SCOPE],
            expires_at=int(record.expires_at),
            resource=record.resource,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.server.store.oauth.revoke_token(token.token, now=self._now(), remote=self.remote)

    def _check_resource(self, bound: str | None) -> None:
        """RFC 8707: a ``resource`` sent to ``/token`` must be the one the grant is bound to."""
        if self.requested_resource is not None and self.requested_resource.rstrip("/") != (bound or ""):
            raise TokenError(
                "invalid_target",
                f"resource {self.requested_resource!r} is not the one this grant is for ({bound!r})",
            )


def _token(issued: IssuedTokens, scopes: list[str]) -> OAuthToken:
    return OAuthToken(
        access_token=issued.access_token,
        token_type="Bearer",
        expires_in=issued.expires_in,
        refresh_token=issued.refresh_token,
        scope=" ".join(s for s in scopes if s != "offline_access") or SCOPE,
    )
