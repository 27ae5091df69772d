"""When to try a save again (pure): after a transport failure, and when Almanac says when.

A save has a deadline (``save_timeout`` after its turn ended). A failure that carries the server's
``Retry-After`` is tried again after exactly that long, if that is still before the deadline; any
other transport failure is tried again at once (on a new connection), then after a short backoff
that doubles up to :data:`MAX_BACKOFF_S`, never past the deadline.
"""

from __future__ import annotations

import email.utils
import math
import time
from dataclasses import dataclass

#: The second attempt after a transport failure waits this long (the first retry is immediate).
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 4.0
#: A ``Retry-After`` longer than this is read as this (a server's hint, not a licence to stall).
MAX_RETRY_AFTER_S = 3600.0


@dataclass(frozen=True)
class Wait:
    """Try again after ``seconds``; or, when ``seconds`` is None, give up now (``why`` says why)."""

    seconds: float | None
    why: str = ""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (whole seconds, or an HTTP date); None when
    absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)


def next_wait(failures: int, retry_after: float | None, remaining: float) -> Wait:
    """After the ``failures``-th failed attempt (1 for the first) of a call with ``remaining``
    seconds left before its deadline, and the server's ``retry_after`` if it sent one."""
    if retry_after is not None:
        if retry_after >= remaining:
            return Wait(
                None,
                f"Almanac asked to be called again in {math.ceil(retry_after)} s, "
                f"past the save's bound ({max(0.0, remaining):.1f} s left)",
            )
        return Wait(retry_after)
    if remaining <= 0:
        return Wait(None, "the save's time ran out")
    backoff = 0.0 if failures <= 1 else min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (failures - 2))
    return Wait(min(backoff, remaining))
