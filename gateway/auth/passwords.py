"""Owner passwords: the one set of rules every way of choosing one obeys (``almanac owner create``
and ``set-password``, sign-up, a password-reset link), and hashing with argon2id (argon2-cffi's
defaults: RFC 9106 low-memory profile).

The rules, stated here and in ``docs/accounts.md``: at least :data:`MIN_PASSWORD` and at most
:data:`MAX_PASSWORD` characters; anything else is the owner's choice (spaces, any script).
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from gateway.errors import InvalidPassword

MIN_PASSWORD = 10
MAX_PASSWORD = 1024

_HASHER = PasswordHasher()


def check_password(password: str) -> str:
    """``password`` if it follows the rules, else :class:`InvalidPassword` saying which."""
    if len(password) < MIN_PASSWORD:
        raise InvalidPassword(f"choose a password of at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise InvalidPassword(f"choose a password of at most {MAX_PASSWORD} characters")
    return password


def check_new_password(password: str, confirm: str) -> str:
    """A new password typed twice: the same both times, and following the rules."""
    if password != confirm:
        raise InvalidPassword("the two passwords differ; type the same password twice")
    return check_password(password)


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False
