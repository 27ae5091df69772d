"""``POST /register``: RFC 7591 dynamic client registration, for public clients only.

Every client registered here authenticates at ``/token`` with PKCE alone (``none``); no secret is
ever issued. A client asking for a secret-based method is registered as ``none`` (RFC 7591 §3.2.1
lets the server replace requested values) and the response says so. Before each registration,
clients that were registered but never used for a sign-in are forgotten (``oauth_unused_client_ttl``),
and past ``oauth_max_unused_clients`` the oldest unused ones go first.

Anyone may call it, so it is rate-limited by address (:mod:`gateway.auth.limits`) and every field
is small (:data:`LIMITS`): a refusal is RFC 7591's ``invalid_client_metadata`` (or
``invalid_redirect_uri``) naming the field and its limit. Redirect URIs are checked as sent,
before any parsing could normalise them (``https:///cb`` is not ``https://cb/``).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from mcp.shared.auth import OAuthClientMetadata
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.auth.oauth.clients import RedirectUriRefused, check_redirect_uri
from gateway.auth.oauth.config import SCOPE, SCOPES_SUPPORTED, OAuthServer

MAX_BODY = 16 * 1024
NO_STORE = {"Cache-Control": "no-store"}
MAX_URI = 2000
#: The longest text (characters) each field may hold.
LIMITS: dict[str, int] = {
    "client_name": 200,
    "scope": 200,
    "software_id": 200,
    "software_version": 100,
    "client_uri": MAX_URI,
    "logo_uri": MAX_URI,
    "tos_uri": MAX_URI,
    "policy_uri": MAX_URI,
    "jwks_uri": MAX_URI,
}
#: The most items each list may hold, and the longest text of each item.
LIST_LIMITS: dict[str, tuple[int, int]] = {
    "redirect_uris": (10, MAX_URI),
    "contacts": (5, 320),
    "grant_types": (5, 100),
    "response_types": (5, 100),
}
MAX_JWKS = 4096


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


def field_problem(raw: dict[str, Any]) -> str | None:
    """What is too long in the metadata as sent (pure), or None. Types are checked afterwards."""
    for name, limit in LIMITS.items():
        value = raw.get(name)
        if isinstance(value, str) and len(value) > limit:
            return f"{name} is {len(value)} characters long; at most {limit} are accepted"
    for name, (most, limit) in LIST_LIMITS.items():
        items = raw.get(name)
        if not isinstance(items, list):
            continue
        if len(items) > most:
            return f"{name} lists {len(items)} values; at most {most} are accepted"
        for item in items:
            if isinstance(item, str) and len(item) > limit:
                return f"a value of {name} is {len(item)} characters long; at most {limit} are accepted"
    if "jwks" in raw and len(json.dumps(raw["jwks"])) > MAX_JWKS:
        return f"jwks is larger than {MAX_JWKS} bytes"
    return None


async def register(server: OAuthServer, request: Request) -> Response:
    body = await _read_body(request)
    if body is None:
        return _error(
            "invalid_client_metadata", f"registration requests are limited to {MAX_BODY} bytes", 413
        )
    try:
        raw = json.loads(body)
    except ValueError:
        return _error("invalid_client_metadata", "the body must be a JSON object of client metadata")
    if not isinstance(raw, dict):
        return _error("invalid_client_metadata", "the body must be a JSON object of client metadata")
    if problem := field_problem(raw):
        return _error("invalid_client_metadata", problem)
    uris = raw.get("redirect_uris")
    try:
        for uri in uris if isinstance(uris, list) else []:
            if isinstance(uri, str):
                check_redirect_uri(uri)
    except RedirectUriRefused as exc:
        return _error("invalid_redirect_uri", str(exc))
    try:
        metadata = OAuthClientMetadata.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return _error("invalid_client_metadata", problems)
    if "authorization_code" not in metadata.grant_types:
        return _error("invalid_client_metadata", "grant_types must include authorization_code")
    if "code" not in metadata.response_types:
        return _error("invalid_client_metadata", "response_types must include code")
    now = server.clock()
    server.store.oauth.collect_garbage(
        now=now,
        unused_client_age=server.config.unused_client_ttl,
        max_unused_clients=server.config.max_unused_clients - 1,  # room for this one
    )
    record = client_record(metadata, "dcr_" + secrets.token_urlsafe(18), int(now))
    server.store.oauth.save_client(record["client_id"], "dcr", record, now=now, expires_at=None)
    return JSONResponse(record, status_code=201, headers=NO_STORE)
