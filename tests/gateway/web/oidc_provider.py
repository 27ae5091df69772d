"""A small OpenID Connect provider for the tests, served over real HTTP on loopback: discovery,
an authorization endpoint that signs in whoever the test says (no page), a token endpoint that
checks the client's secret, the code, the redirect URI and the PKCE verifier, and issues an RS256
ID token signed with joserfc; its keys at ``jwks_uri``."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

CLIENT_ID = "almanac-test"
CLIENT_SECRET = "s3cret-for-tests"


@dataclass
class Person:
    subject: str
    email: str
    email_verified: bool = True


@dataclass
class Provider:
    """The provider's state; ``issuer`` is set once it is serving. ``person`` signs in next."""

    issuer: str = ""
    person: Person | None = None
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    tamper: str | None = None  # "issuer", "audience", "nonce", "signature": a bad ID token

    def app(self) -> Starlette:
        async def discovery(request: Request) -> Response:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": self.issuer + "/authorize",
                    "token_endpoint": self.issuer + "/token",
                    "jwks_uri": self.issuer + "/jwks",
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "code_challenge_methods_supported": ["S256"],
                }
            )

        async def authorize(request: Request) -> Response:
            q = request.query_params
            if q.get("client_id") != CLIENT_ID or self.person is None:
                return JSONResponse({"error": "unauthorized_client"}, status_code=400)
            code = secrets.token_urlsafe(16)
            self.codes[code] = {
                "redirect_uri": q["redirect_uri"],
                "nonce": q.get("nonce"),
                "challenge": q.get("code_challenge"),
                "method": q.get("code_challenge_method"),
                "person": self.person,
            }
            return RedirectResponse(
                q["redirect_uri"] + "?" + urlencode({"code": code, "state": q["state"]}), status_code=302
            )

        async def token(request: Request) -> Response:
            form = {k: str(v) for k, v in (await request.form()).items()}
            self.token_requests.append(form)
            client_id, secret = form.get("client_id"), form.get("client_secret")
            auth = request.headers.get("authorization", "")
            if auth.startswith("Basic "):
                client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            if (client_id, secret) != (CLIENT_ID, CLIENT_SECRET):
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            grant = self.codes.pop(form.get("code", ""), None)
            if grant is None or grant["redirect_uri"] != form.get("redirect_uri"):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            verifier = form.get("code_verifier", "")
            digest = (
                base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            )
            if grant["method"] != "S256" or digest != grant["challenge"]:
                return JSONResponse({"error": "invalid_grant", "error_description": "PKCE"}, status_code=400)
            person: Person = grant["person"]
            now = int(time.time())
            claims = {
                "iss": self.issuer if self.tamper != "issuer" else "https://other.example",
                "sub": person.subject,
                "aud": CLIENT_ID if self.tamper != "audience" else "someone-else",
                "iat": now,
                "exp": now + 300,
                "nonce": grant["nonce"] if self.tamper != "nonce" else "replayed",
                "email": person.email,
                "email_verified": person.email_verified,
            }
            key = (
                self.key
                if self.tamper != "signature"
                else RSAKey.generate_key(2048, parameters={"kid": "k1"})
            )
            id_token = jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)
            return JSONResponse(
                {
                    "access_token": secrets.token_urlsafe(16),
                    "token_type": "Bearer",
                    "expires_in": 300,
                    "id_token": id_token,
                }
            )

        async def jwks(request: Request) -> Response:
            return JSONResponse({"keys": [self.key.as_dict(private=False)]})

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", discovery),
                Route("/authorize", authorize),
                Route("/token", token, methods=["POST"]),
                Route("/jwks", jwks),
            ]
        )
