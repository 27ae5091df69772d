"""Pure pieces of the token model: minting, hashing, and validating labels (``gw:pat``).
The control plane stores what these make; reading a bearer header is :mod:`gateway.auth.tokens`.

A bearer token is ``alm_<kind>_<43 url-safe chars>`` (256 random bits). Only its sha256 is stored;
with that much entropy a plain hash is enough (no salt or slow hash needed), and lookups stay one
indexed equality. The first characters are kept as a ``prefix`` so a listing can say which is which.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Literal

from gateway.errors import InvalidEmail, InvalidName, InvalidScope

TokenKind = Literal["pat", "access", "refresh"]

_SCOPE = re.compile(r"^[a-z0-9][a-z0-9:_./-]{0,63}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TOKEN = re.compile(r"^alm_(pat|access|refresh)_[A-Za-z0-9_-]{43}$")
PREFIX_LEN = 12


@dataclass(frozen=True)
class MintedToken:
    """A fresh token: ``secret`` is shown once and never stored; ``token_hash`` is."""

    secret: str
    token_hash: str
    prefix: str


def mint(kind: TokenKind) -> MintedToken:
    secret = f"alm_{kind}_{secrets.token_urlsafe(32)}"
    return MintedToken(secret=secret, token_hash=hash_token(secret), prefix=secret[: PREFIX_LEN + 4])


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def looks_like_token(secret: str) -> bool:
    """Cheap shape check before touching the database."""
    return _TOKEN.match(secret) is not None


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def validate_scope(label: str) -> str:
    if not _SCOPE.match(label) or ".." in label:
        raise InvalidScope(
            f"scope {label!r} is not a valid label: use lower-case letters, digits and : _ . / - "
            "(at most 64 characters, starting with a letter or digit, no '..'), e.g. project:fjord"
        )
    return label


def validate_email(email: str) -> str:
    email = email.strip()
    if len(email) > 254 or not _EMAIL.match(email):
        raise InvalidEmail(f"{email!r} is not an email address")
    return email


def validate_name(name: str, *, what: str) -> str:
    """A human-given name (connection, workspace): trimmed, 1–100 printable characters."""
    name = name.strip()
    if not name or len(name) > 100 or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidName(f"{what} name must be 1–100 printable characters, got {name!r}")
    return name
