"""How one node tells another "this call is for workspace W, on behalf of this principal"
(``run:scale-out``). Pure functions; the HTTP shells are :mod:`gateway.cluster.forward` and
:mod:`gateway.cluster.forwarded_mcp`.

The edge node has already authenticated the client and applied its rules; the client's token never
leaves it. What travels is the resolved :class:`~gateway.control.records.Principal`, encoded in a
header, and an HMAC-SHA256 (key: the shared ``cluster_secret``) over everything that matters::

    v2 \\n METHOD \\n PATH \\n TIMESTAMP \\n NONCE \\n WORKSPACE \\n TARGET \\n PRINCIPAL \\n SHA-256(BODY)

so a signed request cannot be sent to another node, another path or with another body, nor altered
to speak for another connection, and it is good only for ``window`` seconds around its timestamp.
The receiver compares in constant time, then admits the request's random nonce into its
:class:`~gateway.cluster.replay.ReplayCache`: a request it has already accepted is refused
(:class:`SignatureReplayed`), so a captured request cannot be sent again either. The timestamps are
read from the database's clock as each node knows it (:mod:`gateway.cluster.dbclock`), not from the
nodes' own wall clocks.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import asdict, dataclass

from gateway.cluster.replay import ReplayCache, Replayed
from gateway.control.records import Principal

PRINCIPAL_HEADER = b"x-almanac-cluster-principal"
SIGNATURE_HEADER = b"x-almanac-cluster-signature"
#: A streamed body's SHA-256, declared by its sender and covered by the signature.
CONTENT_DIGEST_HEADER = b"x-almanac-content-sha256"
#: A signed request is refused when its timestamp is further than this from the receiver's clock.
WINDOW_S = 30.0
_VERSION = "v2"
#: What a nonce may hold: 16 to 64 characters of base64url (:func:`new_nonce` makes 22).
_NONCE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class SignatureInvalid(Exception):
    """A request between nodes that must be refused (the message says why, without secrets)."""


class SignatureReplayed(SignatureInvalid):
    """A request signed right that this node has already accepted: a replay."""


def new_nonce() -> str:
    """128 random bits, base64url."""
    return secrets.token_urlsafe(16)


@dataclass(frozen=True)
class Signed:
    """What a forwarded request carries (two header values)."""

    principal: str  # base64url JSON of the principal
    signature: str  # "v2 t=<timestamp> n=<nonce> sig=<hex>"


def encode_principal(principal: Principal) -> str:
    raw = json.dumps(asdict(principal), sort_keys=True, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_principal(encoded: str) -> Principal:
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        fields = json.loads(raw)
        return Principal(
            owner_id=str(fields["owner_id"]),
            workspace_id=str(fields["workspace_id"]),
            connection_id=str(fields["connection_id"]),
            connection_name=str(fields["connection_name"]),
            read_only=bool(fields["read_only"]),
            scope=None if fields["scope"] is None else str(fields["scope"]),
            resource=None if fields.get("resource") is None else str(fields["resource"]),
            reads_unscoped=fields.get("reads_unscoped") is True,
        )
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise SignatureInvalid("the forwarded principal is not readable") from exc


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _mac(
    secret: str,
    *,
    method: str,
    path: str,
    timestamp: int,
    nonce: str,
    workspace_id: str,
    target: str,
    principal: str,
    digest: str,
) -> str:
    message = "\n".join(
        (_VERSION, method.upper(), path, str(timestamp), nonce, workspace_id, target, principal, digest)
    )
    return hmac.new(secret.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


#: The principal header of a call made by the cluster itself (moving a workspace), not for a client.
NO_PRINCIPAL = "-"


def sign(
    secret: str,
    *,
    method: str,
    path: str,
    principal: Principal | None,
    target: str,
    body: bytes,
    now: float,
    workspace_id: str | None = None,
    digest: str | None = None,
    nonce: str | None = None,
) -> Signed:
    """The two header values that let node ``target`` serve this call for ``principal`` (or, with
    no principal, the cluster's own call about ``workspace_id``), once. ``digest``: the SHA-256 of a
    body streamed rather than held (``body`` is then empty; the receiver hashes what arrives).
    ``nonce``: a fresh random one unless given."""
    encoded = NO_PRINCIPAL if principal is None else encode_principal(principal)
    workspace = workspace_id if principal is None else principal.workspace_id
    assert workspace is not None, "a call without a principal names its workspace"
    timestamp = int(now)
    nonce = new_nonce() if nonce is None else nonce
    mac = _mac(
        secret,
        method=method,
        path=path,
        timestamp=timestamp,
        nonce=nonce,
        workspace_id=workspace,
        target=target,
        principal=encoded,
        digest=body_digest(body) if digest is None else digest,
    )
    return Signed(encoded, f"{_VERSION} t={timestamp} n={nonce} sig={mac}")


def _parse_signature(value: str) -> tuple[int, str, str]:
    parts = value.split(" ")
    if (
        len(parts) != 4
        or parts[0] != _VERSION
        or not parts[1].startswith("t=")
        or not parts[2].startswith("n=")
        or not parts[3].startswith("sig=")
    ):
        raise SignatureInvalid(
            "the cluster signature is malformed (expected 'v2 t=<seconds> n=<nonce> sig=<hex>'; "
            "every node of a cluster runs the same version)"
        )
    stamp, nonce = parts[1][2:], parts[2][2:]
    if not stamp.isdigit() or len(stamp) > 12:
        raise SignatureInvalid("the cluster signature's timestamp is not a number")
    if not 16 <= len(nonce) <= 64 or not set(nonce) <= _NONCE_CHARS:
        raise SignatureInvalid("the cluster signature's nonce is not 16–64 characters of base64url")
    return int(stamp), nonce, parts[3][4:]


def verify(
    secret: str,
    *,
    method: str,
    path: str,
    principal_header: str | None,
    signature_header: str | None,
    here: str,
    body: bytes,
    now: float,
    replay: ReplayCache,
    window: float = WINDOW_S,
) -> Principal:
    """The principal a request from another node speaks for, or :class:`SignatureInvalid`."""
    if principal_header == NO_PRINCIPAL:
        raise SignatureInvalid("this endpoint serves calls made for a client only")
    principal = decode_principal(principal_header) if principal_header else None
    _check(
        secret,
        method=method,
        path=path,
        principal_header=principal_header,
        signature_header=signature_header,
        workspace_id=principal.workspace_id if principal else "",
        here=here,
        body=body,
        now=now,
        replay=replay,
        window=window,
    )
    assert principal is not None
    return principal


def verify_cluster_call(
    secret: str,
    *,
    method: str,
    path: str,
    principal_header: str | None,
    signature_header: str | None,
    workspace_id: str,
    here: str,
    body: bytes,
    now: float,
    replay: ReplayCache,
    window: float = WINDOW_S,
    digest: str | None = None,
) -> None:
    """Raise :class:`SignatureInvalid` unless this is the cluster's own signed call about
    ``workspace_id`` (one that speaks for no client). ``digest``: the SHA-256 the caller declares
    for a streamed body (checked against the bytes once they have arrived)."""
    if principal_header is not None and principal_header != NO_PRINCIPAL:
        raise SignatureInvalid("this endpoint serves the cluster's own calls only")
    _check(
        secret,
        method=method,
        path=path,
        principal_header=principal_header,
        signature_header=signature_header,
        workspace_id=workspace_id,
        here=here,
        body=body,
        now=now,
        replay=replay,
        window=window,
        digest=digest,
    )


def _check(
    secret: str,
    *,
    method: str,
    path: str,
    principal_header: str | None,
    signature_header: str | None,
    workspace_id: str,
    here: str,
    body: bytes,
    now: float,
    replay: ReplayCache,
    window: float,
    digest: str | None = None,
) -> None:
    if not principal_header or not signature_header:
        raise SignatureInvalid("this endpoint serves the other nodes only: the call is not signed")
    timestamp, nonce, mac = _parse_signature(signature_header)
    if abs(now - timestamp) > window:
        raise SignatureInvalid(
            f"the cluster signature is stale ({abs(now - timestamp):.0f} s from the database's clock "
            f"as this node reads it, allowed {window:g} s); sign the call anew"
        )
    expected = _mac(
        secret,
        method=method,
        path=path,
        timestamp=timestamp,
        nonce=nonce,
        workspace_id=workspace_id,
        target=here,
        principal=principal_header,
        digest=body_digest(body) if digest is None else digest,
    )
    if not hmac.compare_digest(expected.encode("ascii"), mac.encode("ascii", errors="replace")):
        raise SignatureInvalid("the cluster signature does not match (another secret, node, path or body)")
    try:
        replay.admit(nonce, timestamp, now)
    except Replayed as exc:
        raise SignatureReplayed(str(exc)) from None
