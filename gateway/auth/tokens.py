"""What a request carries of the token model (``gw:pat``): the bearer token of an
``Authorization`` header, and what a pinned connection reads as the consent and token forms send it.
Minting, hashing and validating tokens is :mod:`gateway.control.tokens`.
"""

from __future__ import annotations

from gateway.errors import BadRequest

#: What a pinned connection reads, as the consent and token forms send it (field ``reads``).
READS_SCOPE_ONLY, READS_UNSCOPED_TOO = "scope", "unscoped"


def reads_unscoped(choice: str | None) -> bool:
    """The ``reads`` field of the consent and token forms: ``scope`` (this scope only, also when the
    field is absent) or ``unscoped`` (this scope and unscoped memories)."""
    if choice in (None, "", READS_SCOPE_ONLY):
        return False
    if choice == READS_UNSCOPED_TOO:
        return True
    raise BadRequest(
        f"what a pinned connection reads must be {READS_SCOPE_ONLY!r} (this scope only) or "
        f"{READS_UNSCOPED_TOO!r} (this scope and unscoped memories), not {choice!r}"
    )


def parse_bearer(header: str | None) -> str | None:
    """The token from an ``Authorization: Bearer …`` header, or None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
