"""Offline work on a workspace the engine is not serving: rebuild its index, check it.

    python -m engine --reindex --dir PATH [--create]   delete the index, rebuild it, report progress
    python -m engine --doctor --dir PATH               compare the index with the store, report

Both take the workspace's lock (so they refuse a workspace an engine is serving) and refuse a path
that is not a workspace unless ``--create`` (a typo must not become an empty store). Progress and
reports go to stderr, one line at a time, with counts.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import apsw

from engine.embed.base import Embedder
from engine.errors import NotAWorkspace
from engine.index import docs, schema
from engine.index.indexer import INDEX_DIR, INDEX_FILE, MAX_ITEM_BYTES, Indexer
from engine.store.layout import LOCK_NAME, STORE_DIRS
from engine.store.model import State
from engine.store.workspace import Workspace

# what only a workspace folder holds (a new one may hold nothing but its lock and index)
MARKERS = (*STORE_DIRS, INDEX_DIR, LOCK_NAME)
PROGRESS_EVERY_S = 1.0


def is_workspace(path: Path) -> bool:
    return path.is_dir() and any((path / marker).exists() for marker in MARKERS)


def check_workspace(path: Path, *, create: bool) -> None:
    """Refuse a path that is not a workspace (unless ``create``) with a message that says what to do."""
    if create or is_workspace(path):
        return
    what = (
        "does not exist"
        if not path.exists()
        else "is not a directory"
        if not path.is_dir()
        else ("is not an Almanac workspace (no facts/, notes/, logs/ or index)")
    )
    raise NotAWorkspace(f"{path} {what}; check the path, or pass --create to start a new workspace there")


def store_summary(ws: Workspace) -> str:
    notes = sum(1 for r in ws.notes.values() if r.state is not State.RETIRED)
    logs = sum(1 for r in ws.logs.values() if r.state is not State.RETIRED)
    return f"{notes} notes, {logs} log entries, {len(ws.facts.records)} facts"


def reindex(
    ws: Workspace, embedder: Embedder, out: TextIO = sys.stderr, *, max_item_bytes: int = MAX_ITEM_BYTES
) -> None:
    """Delete the workspace's index and rebuild it from the store, printing progress with counts."""
    started = time.monotonic()
    say = _printer(out, "reindex")
    say(f"read {store_summary(ws)} from {ws.root}")
    shutil.rmtree(ws.root / INDEX_DIR, ignore_errors=True)
    indexer = Indexer(ws, embedder, scan_interval_s=None, max_item_bytes=max_item_bytes)
    try:
        indexer.start(catch_up_in_background=False)
        counts = indexer.db.reader.counts()
        say(f"indexed {counts['chunks']} chunks and {counts['facts']} facts for keyword search")
        total = counts["chunks_pending"] + counts["facts_pending"]
        if total:
            say(f"embedding {total} chunks and facts with {embedder.model_id}")
        said = -1  # a line only when the count moved; the last one says N of N
        while not indexer.wait_idle(PROGRESS_EVERY_S):
            done = total - indexer.backlog()
            if done != said:
                say(f"embedded {done} of {total}")
                said = done
        left = indexer.backlog()
        if total and not left and said != total:
            say(f"embedded {total} of {total}")
        if total and left:
            say(
                f"{left} of {total} are still waiting for embeddings (provider not ready); they will be "
                "embedded when the engine next serves this workspace"
            )
    finally:
        indexer.stop()
    say(f"done in {time.monotonic() - started:.1f} s")


@dataclass(frozen=True)
class Diagnosis:
    problems: tuple[str, ...]  # each one line, saying what is wrong
    notes: tuple[str, ...]  # facts worth knowing that are not problems

    @property
    def healthy(self) -> bool:
        return not self.problems


def _fits(item: docs.Item | None, max_item_bytes: int) -> bool:
    return item is not None and len(item.text.encode("utf-8", "surrogatepass")) <= max_item_bytes


def diagnose(ws: Workspace, model_id: str, *, max_item_bytes: int = MAX_ITEM_BYTES) -> Diagnosis:
    """Compare the index with what the store says it should hold; read-only (the index file is opened
    read-only, never repaired here)."""
    problems = [f"{p.path}:{p.line}: {p.message}" for p in ws.problems]
    notes = [store_summary(ws)]
    path = ws.root / INDEX_DIR / INDEX_FILE
    if not path.is_file():
        return Diagnosis(
            (*problems, "there is no index (the engine builds one when it starts)"), tuple(notes)
        )
    try:
        db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return Diagnosis((*problems, f"the index cannot be opened: {exc}"), tuple(notes))
    try:
        version = db.execute("PRAGMA user_version").fetchall()[0][0]
        if version != schema.SCHEMA_VERSION:
            problems.append(
                f"the index has schema version {version}; this engine writes {schema.SCHEMA_VERSION}"
            )
            return Diagnosis(tuple(problems), tuple(notes))
        check = db.execute("PRAGMA quick_check").fetchall()[0][0]
        if check != "ok":
            problems.append(f"the index file is damaged: {check}")
            return Diagnosis(tuple(problems), tuple(notes))
        have: dict[str, dict[int, str]] = {}
        for memory, chunk, digest in db.execute("SELECT memory, chunk, hash FROM chunks"):
            have.setdefault(str(memory), {})[int(str(chunk))] = str(digest)
        have_facts = {str(m): str(h) for m, h in db.execute("SELECT memory, hash FROM facts")}
        meta = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta")}
        pending = 0
        for table in ("chunks", "facts"):
            pending += int(
                str(db.execute(f"SELECT count(*) FROM {table} WHERE pending = 1").fetchall()[0][0])
            )
    except apsw.Error as exc:
        problems.append(f"the index cannot be read: {exc}")
        return Diagnosis(tuple(problems), tuple(notes))
    finally:
        db.close()
    candidates = (*map(docs.note_item, ws.notes.values()), *map(docs.log_item, ws.logs.values()))
    items = [i for i in candidates if i is not None and _fits(i, max_item_bytes)]  # as the indexer does
    wanted: dict[str, dict[int, str]] = {}
    for doc in docs.all_docs(items):
        wanted.setdefault(doc.memory, {})[doc.chunk] = doc.hash
    facts = {f.memory: f.hash for r in ws.facts.records.values() if (f := docs.fact_doc(r))}
    for label, want, got in (("memories", wanted, have), ("facts", facts, have_facts)):
        missing = sorted(set(want) - set(got))
        stale = sorted(m for m in set(want) & set(got) if want[m] != got[m])
        extra = sorted(set(got) - set(want))
        for kind, found in (
            ("missing from", missing),
            ("out of date in", stale),
            ("no longer in the store but in", extra),
        ):
            if found:
                shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
                problems.append(f"{len(found)} {label} {kind} the index: {shown}")
    if meta.get("model_id") != model_id:
        notes.append(
            f"the index holds vectors of {meta.get('model_id')!r}; the engine now embeds with "
            f"{model_id!r} (it re-embeds on start)"
        )
    notes.append(
        f"index: {sum(len(c) for c in have.values())} chunks, {len(have_facts)} facts, "
        f"{pending} waiting for embeddings"
    )
    return Diagnosis(tuple(problems), tuple(notes))


def report(diagnosis: Diagnosis, root: Path, out: TextIO = sys.stderr) -> int:
    say = _printer(out, "doctor")
    for line in diagnosis.notes:
        say(line)
    for line in diagnosis.problems:
        say(f"problem: {line}")
    if diagnosis.healthy:
        say(f"{root}: the index matches the store")
        return 0
    say(
        f"{len(diagnosis.problems)} problem(s); `python -m engine --reindex --dir {root}` (or "
        "`almanac engine reindex`) rebuilds the index from the store"
    )
    return 1


def _printer(out: TextIO, what: str) -> Callable[[str], None]:
    def say(line: str) -> None:
        print(f"{what}: {line}", file=out, flush=True)

    return say
