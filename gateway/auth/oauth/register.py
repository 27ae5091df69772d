"""``POST /register``: RFC 7591 dynamic client registration, for public clients only.

Every client registered here authenticates at ``/token`` with PKCE alone (``none``); no secret is
ever issued. A client asking for a secret-based method is registered as ``none`` (RFC 7591 §3.2.1
lets the server replace requested values) and the response says so. Before each registration,
clients that were registered but never used for a sign-in are forgotten (``oauth_unused_client_ttl``).
"""

from __future__ import annotations

import secrets
from typing import Any

from mcp.shared.auth import OAuthClientMetadata
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.auth.oauth.clients import RedirectUriRefused, check_redirect_uri
from gateway.auth.oauth.config import SCOPE, SCOPES_SUPPORTED, OAuthServer

MAX_BODY = 64 * 1024
NO_STORE = {"Cache-Control": "no-store"}


def _error(code: str, description: str, status: int = 400) -> Response:
    return JSONResponse(
        {"error": code, "error_description": description}, status_code=status, headers=NO_STORE
    )


def client_record(metadata: OAuthClientMetadata, client_id: str, issued_at: int) -> dict[str, Any]:
    """The stored (and returned) record of a newly registered public client."""
    record = metadata.model_dump(mode="json", exclude_none=True)
    requested = (metadata.scope or SCOPE).split()
    record.update(
        client_id=client_id,
        client_id_issued_at=issued_at,
        token_endpoint_auth_method="none",
        scope=" ".join(s for s in requested if s in SCOPES_SUPPORTED) or SCOPE,
        grant_types=[g for g in metadata.grant_types if g in ("authorization_code", "refresh_token")],
    )
    for secret in ("client_secret", "client_secret_expires_at"):
        record.pop(secret, None)
    return record


async def _read_body(request: Request) -> bytes | None:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return bytes(body)


async def register(server: OAuthServer, request: Request) -> Response:
    body = await _read_body(request)
    if body is None:
        return _error(
            "invalid_client_metadata", f"registration requests are limited to {MAX_BODY} bytes", 413
        )
    try:
        metadata = OAuthClientMetadata.model_validate_json(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return _error("invalid_client_metadata", problems)
    try:
        for uri in metadata.redirect_uris or []:
            check_redirect_uri(str(uri))
    except RedirectUriRefused as exc:
        return _error("invalid_redirect_uri", str(exc))
    if "authorization_code" not in metadata.grant_types:
        return _error("invalid_client_metadata", "grant_types must include authorization_code")
    if "code" not in metadata.response_types:
        return _error("invalid_client_metadata", "response_types must include code")
    now = server.clock()
    server.store.collect_garbage(now=now, unused_client_age=server.config.unused_client_ttl)
    record = client_record(metadata, "dcr_" + secrets.token_urlsafe(18), int(now))
    server.store.save_client(record["client_id"], "dcr", record, now=now, expires_at=None)
    return JSONResponse(record, status_code=201, headers=NO_STORE)
