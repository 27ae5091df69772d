"""``memory_status`` (``recall:status``): counts, bytes, index backlog, provider state, settings."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine import settings as engine_settings
from engine.ageing.citations import FOLDING, JOURNAL
from engine.ageing.retrieval_log import LOG, ROTATED
from engine.index.indexer import CACHE_DIR, INDEX_DIR
from engine.recall.context import Recall
from engine.scope import Caller, pinned_limit, within
from engine.store.layout import RETIRED
from engine.store.model import State
from engine.store.workspace import FileProblem

#: At most this many files are named in each list (the counts are always whole).
MAX_NAMED = 50
#: Files at the workspace's top that are records about the store, not memories.
DERIVED_FILES = (LOG, ROTATED, JOURNAL, FOLDING, ".almanac.lock")


def _bytes(root: Path, skip: tuple[str, ...] = (), files: tuple[str, ...] = ()) -> int:
    """Bytes under ``root``, leaving out the top-level folders ``skip`` and top-level files ``files``."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in files]
        for name in filenames:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
    return total


def memory_status(recall: Recall, caller: Caller) -> dict[str, Any]:
    indexer = recall.indexer
    ws = indexer.ws
    limit = pinned_limit(caller)
    with ws.lock:
        counts: dict[str, dict[str, int]] = {
            kind: {s.value: 0 for s in State} for kind in ("fact", "note", "log")
        }
        for record in ws.facts.records.values():
            if within(limit, record.scope):
                counts["fact"]["retired" if record.retired else "live"] += 1
        for note in ws.notes.values():
            if within(limit, note.note.scope):
                counts["note"][note.state.value] += 1
        for entry in ws.logs.values():
            if within(limit, entry.entry.scope):
                counts["log"][entry.state.value] += 1
        newest = ws.remembered_at()
        unreadable = _unreadable(ws.problems)
        too_large = sorted(indexer.too_large.values(), key=lambda t: t.path)
    index = indexer.db.reader.counts()
    provider = indexer.status
    settings = asdict(recall.settings)
    settings["embedding_provider"] = indexer.embedder.provider
    origin: dict[str, str] = {}
    setting_problems: list[str] = []
    if recall.engine_settings is not None:
        shown = engine_settings.report(recall.engine_settings)
        settings.update(shown["values"])
        settings["embedding_provider"] = indexer.embedder.provider
        origin, setting_problems = shown["origin"], shown["problems"]
    return {
        "counts": counts,
        "storage_bytes": {
            "store": _bytes(ws.root, skip=(INDEX_DIR, CACHE_DIR, RETIRED), files=DERIVED_FILES),
            "index": _bytes(ws.root / INDEX_DIR) if (ws.root / INDEX_DIR).exists() else 0,
        },
        "index": {
            "chunks": index["chunks"],
            "facts": index["facts"],
            "links": index["links"],
            "waiting_for_embeddings": index["chunks_pending"] + index["facts_pending"],
            "sessions_waiting": index["groups_dirty"],
            "model_id": indexer.db.model_id,
            "dim": indexer.db.dim,
            "not_indexed": len(too_large),
            **indexer.progress.to_json(),
        },
        "embedding": provider.to_json()
        if provider is not None
        else {
            "provider": indexer.embedder.provider,
            "state": "checking",
            "model_id": indexer.embedder.model_id,
        },
        "settings": settings,
        "settings_origin": origin,
        "settings_problems": setting_problems,
        "newest_memory": None if newest is None else newest.isoformat(),
        "unreadable_files": len(unreadable),
        # file names (relative to the workspace) only for connections that see the whole workspace
        "problems": [] if limit is not None else unreadable[:MAX_NAMED],
        "not_indexed": []
        if limit is not None
        else [
            {"path": t.path, "bytes": t.bytes, "reason": f"larger than {indexer.max_item_bytes:,} bytes"}
            for t in too_large[:MAX_NAMED]
        ],
    }


def _unreadable(problems: list[FileProblem]) -> list[dict[str, Any]]:
    """One entry per file that could not be read whole: its first problem and how many it has."""
    by_file: dict[str, dict[str, Any]] = {}
    for p in problems:
        entry = by_file.setdefault(p.path, {"path": p.path, "line": p.line, "problem": p.message, "count": 0})
        entry["count"] += 1
    return sorted(by_file.values(), key=lambda e: e["path"])
