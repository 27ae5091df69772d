"""Time-sortable identifiers (ULID layout: 48-bit milliseconds + 80 random bits, Crockford base32).

``evt_…`` names a ledger event, ``nte_…`` a note, ``log_…`` a log entry. A note's or log
entry's creation event shares its ULID (``nte_X`` was created by ``evt_X``). A fact is named
by its key: ``fct_`` + a hash of (subject, predicate, scope) after normalisation, so the same
fact always has the same id.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from datetime import datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_BITS = 80
_MAX_RANDOM = (1 << _RANDOM_BITS) - 1

EVENT = "evt"
NOTE = "nte"
LOG = "log"
FACT = "fct"


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


class UlidClock:
    """Monotonic ULIDs: within one millisecond the random part counts up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def ulid(self, when: datetime) -> str:
        ms = int(when.timestamp() * 1000)
        with self._lock:
            if ms <= self._last_ms:
                ms = self._last_ms
                rand = self._last_rand + 1
                if rand > _MAX_RANDOM:  # pragma: no cover - 2**80 ids in one millisecond
                    ms += 1
                    rand = secrets.randbits(_RANDOM_BITS - 1)
            else:
                rand = secrets.randbits(_RANDOM_BITS - 1)  # leave headroom to count up
            self._last_ms, self._last_rand = ms, rand
        return _encode(ms, 10) + _encode(rand, 16)


def ulid_of(memory_id: str) -> str:
    return memory_id.split("_", 1)[1]


def event_id_for(memory_id: str) -> str:
    """The id of the event that created a note or log entry."""
    return f"{EVENT}_{ulid_of(memory_id)}"


def fact_id(subject_key: str, predicate_key: str, scope: str | None) -> str:
    digest = hashlib.sha256("\x1f".join((subject_key, predicate_key, scope or "")).encode()).hexdigest()
    return f"{FACT}_{digest[:20]}"


def kind_of(memory_id: str) -> str | None:
    """'fact', 'note' or 'log' from an id's prefix; None when the id has no known prefix."""
    prefix = memory_id.split("_", 1)[0]
    return {FACT: "fact", NOTE: "note", LOG: "log"}.get(prefix)
