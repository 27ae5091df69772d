"""``retrieval-log.jsonl`` (``life:retrieval-log``): what recall put in front of a model, and when.

One JSON line per search: ``ts``, ``query`` (the query itself only when the workspace allows it
with ``log_queries``; otherwise ``query_sha256``, enough to spot repeats and nothing more),
``scope``, ``destination``, ``mode`` (keyword | semantic | hybrid | facts), ``loaded`` (memories
considered), ``trimmed`` (left out for the budget or as weak matches), ``kept`` (ids, in reply
order), ``scores``, ``tokens``, ``latency_ms``, and who asked: ``connection_id`` (the gateway's
id of the connection, stable when the connection is renamed or revoked; the gateway shows its
current name) or, without the gateway (stdio), ``source`` (the client's self-reported name).
Never a memory's words: a log that copied the corpus would be a second copy with none of its
discipline.

The file is appended without fsync (it is a record, not a write anyone was promised) and rotated
by size: past ``max_bytes`` it becomes ``retrieval-log.1.jsonl`` (the older one is dropped).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.store.model import format_time

LOG = "retrieval-log.jsonl"
ROTATED = "retrieval-log.1.jsonl"


@dataclass(frozen=True)
class Retrieval:
    """One search, as the log records it (ids and numbers only)."""

    when: datetime
    query: str | None
    scope: str | None
    destination: str
    mode: str
    loaded: int
    kept: tuple[str, ...]
    scores: tuple[float, ...]
    tokens: int
    latency_ms: float
    source: str | None
    connection_id: str | None = None


def line_of(r: Retrieval, *, log_queries: bool) -> dict[str, Any]:
    """The JSON object of one log line (pure)."""
    out: dict[str, Any] = {"ts": format_time(r.when)}
    if r.query is not None:
        if log_queries:
            out["query"] = r.query
        else:
            out["query_sha256"] = hashlib.sha256(r.query.encode()).hexdigest()
    out.update(
        {
            "scope": r.scope,
            "destination": r.destination,
            "mode": r.mode,
            "loaded": r.loaded,
            "trimmed": max(r.loaded - len(r.kept), 0),
            "kept": list(r.kept),
            "scores": [round(s, 4) for s in r.scores],
            "tokens": r.tokens,
            "latency_ms": round(r.latency_ms, 2),
            "source": r.source,
            "connection_id": r.connection_id,
        }
    )
    return out


def of_reply(
    reply: Mapping[str, Any],
    *,
    when: datetime,
    query: str | None,
    scope: str | None,
    latency_ms: float,
    source: str | None,
    destination: str = "get_context",
    connection_id: str | None = None,
) -> Retrieval:
    """The log record of a ``get_context`` reply (reads ids, scores and counts, never ``text``)."""
    items: Sequence[Mapping[str, Any]] = [*reply.get("facts", ()), *reply.get("notes", ())]
    dropped = reply.get("dropped", {}).get("count", 0)
    return Retrieval(
        when=when,
        query=query,
        scope=scope,
        destination=destination,
        mode=str(reply.get("retrieval", "")),
        loaded=len(items) + int(dropped),
        kept=tuple(str(i["id"]) for i in items),
        scores=tuple(float(i.get("score", 0.0)) for i in items),
        tokens=int(reply.get("tokens", 0)),
        latency_ms=latency_ms,
        source=source,
        connection_id=connection_id,
    )


class RetrievalLog:
    def __init__(self, root: Path, *, max_bytes: int, log_queries: bool) -> None:
        self.path = root / LOG
        self.rotated = root / ROTATED
        self.max_bytes = max_bytes
        self.log_queries = log_queries
        self._lock = threading.Lock()

    def write(self, retrieval: Retrieval) -> None:
        line = line_of(retrieval, log_queries=self.log_queries)
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        with self._lock:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(data) > self.max_bytes:
                os.replace(self.path, self.rotated)
            with open(self.path, "ab") as handle:
                handle.write(data)
