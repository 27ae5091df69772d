"""Discovery documents: RFC 9728 protected-resource metadata and RFC 8414 server metadata (also at
the OpenID-configuration address clients probe). Pure functions of the issuer."""

from __future__ import annotations

from typing import Any

from gateway.auth.oauth.config import SCOPE, SCOPES_SUPPORTED


def protected_resource(issuer: str) -> dict[str, Any]:
    return {
        "resource": issuer + "/mcp",
        "authorization_servers": [issuer],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "Almanac",
    }


def authorization_server(issuer: str) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": issuer + "/authorize",
        "token_endpoint": issuer + "/token",
        "registration_endpoint": issuer + "/register",
        "revocation_endpoint": issuer + "/revoke",
        "scopes_supported": list(SCOPES_SUPPORTED),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }
