"""The host's retrieval log (``life:retrieval-log``): one JSON line per search the library made.

It answers "what did memory put in front of the model, when, and from which provider" from a file,
for any provider (Almanac's engine keeps its own log as well; another MCP server may keep none).
A line holds ``ts``, ``provider``, ``destination`` (``main-context`` for the automatic load; what
the host named for a deliberate one), ``scope`` (``{}`` for the user layer), ``query_sha256`` (the
query's hash, enough to spot repeats), ``mode``, ``loaded`` (memories the provider considered),
``trimmed`` (left out: over ``topK``, weak, or not fitting the block), ``kept`` (the ids in the
block, in order), ``chars`` (the block's size), ``latency_ms`` and ``outcome`` (``ok``,
``unavailable``, ``refused``, ``timeout``). Never a memory's words, nor the query's: a log that
copied the corpus would be a second copy of it with none of its archiving discipline.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from almanac.host.scope import Scope, as_log

MAIN_CONTEXT = "main-context"


@dataclass(frozen=True)
class Retrieval:
    """One search, as the log records it (ids and numbers only)."""

    provider: str
    destination: str
    scope: Scope | None
    query: str
    outcome: str = "ok"
    mode: str = ""
    loaded: int = 0
    kept: tuple[str, ...] = ()
    chars: int = 0
    latency_ms: float = 0.0
    when: datetime = field(default_factory=lambda: datetime.now(UTC))


def line_of(r: Retrieval) -> dict[str, Any]:
    """The JSON object of one log line (pure)."""
    return {
        "ts": r.when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "provider": r.provider,
        "destination": r.destination,
        "scope": as_log(r.scope),
        "query_sha256": hashlib.sha256(r.query.encode()).hexdigest(),
        "mode": r.mode,
        "loaded": r.loaded,
        "trimmed": max(r.loaded - len(r.kept), 0),
        "kept": list(r.kept),
        "chars": r.chars,
        "latency_ms": round(r.latency_ms, 2),
        "outcome": r.outcome,
    }


class RetrievalLog:
    """Appends lines to ``path`` (created with its folder on the first line)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, retrieval: Retrieval) -> None:
        data = json.dumps(line_of(retrieval), ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(data)
