"""Client ID metadata documents: a ``client_id`` that is an https URL names a JSON document that
describes the client (draft-ietf-oauth-client-id-metadata-document, MCP 2025-11-25 onwards).

Fetching a URL a stranger chose is a server-side request forgery risk, so: https only; the host is
resolved first and every address must be public (unless ``oauth_cimd_allow_private``), and the
request goes to that resolved address (no second lookup an attacker could rebind); no redirects;
a timeout and a size cap; the document's ``client_id`` must be the URL itself and its redirect URIs
must pass :func:`~gateway.auth.oauth.clients.check_redirect_uri`. Good documents are cached per
their ``Cache-Control: max-age`` (bounded).
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx

from gateway.auth.oauth.clients import RedirectUriRefused, check_redirect_uri
from gateway.auth.oauth.config import CimdPolicy

DEFAULT_CACHE = 3600.0
MIN_CACHE, MAX_CACHE = 60.0, 86400.0
_MAX_AGE = re.compile(r"max-age=(\d+)")


class CimdRefused(Exception):
    """The document could not be used; the message says why (shown to the person signing in)."""


@dataclass(frozen=True)
class Document:
    metadata: dict[str, Any]
    cache_for: float


def is_metadata_url(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


def check_url(client_id: str, policy: CimdPolicy) -> tuple[str, str, int]:
    """(scheme, host, port) of an acceptable client ID URL, else :class:`CimdRefused`."""
    parts = urlsplit(client_id)
    allowed = ("https", "http") if policy.allow_private else ("https",)
    if parts.scheme not in allowed:
        raise CimdRefused(f"client_id {client_id!r} must be an https URL")
    if not parts.hostname or parts.username or parts.password or parts.fragment:
        raise CimdRefused(f"client_id {client_id!r} must be a plain https URL (no user info or fragment)")
    if parts.path in ("", "/"):
        raise CimdRefused(f"client_id {client_id!r} must have a path naming its metadata document")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port


def address_allowed(address: str, policy: CimdPolicy) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return policy.allow_private or (ip.is_global and not ip.is_multicast)


async def resolve(host: str, port: int, policy: CimdPolicy) -> str:
    """One address of ``host``, provided every address it resolves to is allowed."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise CimdRefused(f"cannot resolve {host!r}: {exc}") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise CimdRefused(f"{host!r} has no address")
    refused = [a for a in addresses if not address_allowed(a, policy)]
    if refused:
        raise CimdRefused(f"{host!r} resolves to a private or reserved address ({refused[0]}); refused")
    return addresses[0]


def cache_seconds(cache_control: str | None) -> float:
    if cache_control and ("no-store" in cache_control or "no-cache" in cache_control):
        return MIN_CACHE
    found = _MAX_AGE.search(cache_control or "")
    seconds = float(found.group(1)) if found else DEFAULT_CACHE
    return min(MAX_CACHE, max(MIN_CACHE, seconds))


def validate_document(client_id: str, raw: bytes) -> dict[str, Any]:
    """The document's metadata, checked: it names itself, and its redirect URIs are acceptable."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CimdRefused(f"the client metadata document at {client_id} is not JSON") from exc
    if not isinstance(doc, dict):
        raise CimdRefused(f"the client metadata document at {client_id} is not a JSON object")
    if doc.get("client_id") != client_id:
        raise CimdRefused(f"the client metadata document's client_id must be {client_id!r} itself")
    uris = doc.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise CimdRefused("the client metadata document must list its redirect_uris")
    try:
        for uri in uris:
            check_redirect_uri(uri)
    except RedirectUriRefused as exc:
        raise CimdRefused(str(exc)) from exc
    method = doc.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise CimdRefused(
            f"token_endpoint_auth_method {method!r} is not supported; "
            "this server takes public clients ('none')"
        )
    for secret in ("client_secret", "client_secret_expires_at"):
        doc.pop(secret, None)
    doc["token_endpoint_auth_method"] = "none"
    return doc


async def fetch(client_id: str, policy: CimdPolicy) -> Document:
    """Fetch and check the document ``client_id`` names."""
    scheme, host, port = check_url(client_id, policy)
    address = await resolve(host, port, policy)
    parts = urlsplit(client_id)
    pinned_host = f"[{address}]" if ":" in address else address
    pinned = urlunsplit((scheme, f"{pinned_host}:{port}", parts.path, parts.query, ""))
    headers = {"Host": parts.netloc, "Accept": "application/json"}
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    timeout = httpx.Timeout(policy.timeout)
    try:
        with anyio.fail_after(policy.timeout):
            async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as http:
                request = http.build_request("GET", pinned, headers=headers, extensions=extensions)
                response = await http.send(request, stream=True)
                try:
                    if response.status_code != 200:
                        raise CimdRefused(f"fetching {client_id} answered HTTP {response.status_code}")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > policy.max_bytes:
                            raise CimdRefused(
                                f"the client metadata document is over {policy.max_bytes} bytes"
                            )
                finally:
                    await response.aclose()
    except TimeoutError as exc:
        raise CimdRefused(f"fetching {client_id} took longer than {policy.timeout:g} s") from exc
    except httpx.HTTPError as exc:
        raise CimdRefused(f"fetching {client_id} failed: {exc}") from exc
    return Document(
        validate_document(client_id, bytes(body)), cache_seconds(response.headers.get("cache-control"))
    )
