"""Keeping the index in step with the store: writes, hand edits, and background embedding.

- Every durable write calls :meth:`Indexer.on_change` (a workspace listener, under the
  workspace lock): the memory's FTS rows — and its neighbours', whose context names it — are
  written at once, so a fresh write is found by its words straight away (``recall:fresh-facts``).
- On start, :meth:`Indexer.reconcile` compares every row's content hash with what the store
  says it should be and rewrites only the difference (``store:hand-edits``); while running, a
  cheap periodic scan of file sizes and mtimes notices edits made by hand, reloads the catalog
  and reconciles again.
- A background thread embeds whatever is pending and refreshes session rows
  (``embed:background``); the write path never waits for it.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.embed.base import Embedder, ProviderStatus
from engine.embed.cache import EmbeddingCache, embed_documents_cached
from engine.index import docs as D
from engine.index.db import IndexDB
from engine.store import ids
from engine.store.model import State
from engine.store.workspace import Workspace

log = logging.getLogger("almanac.engine.index")

INDEX_DIR = ".index"
INDEX_FILE = "index.sqlite"
CACHE_FILE = "embeddings.sqlite"
_STORE_DIRS = ("facts", "notes", "archive", "retired", "logs")
_BATCH = 64

Signature = dict[str, tuple[int, int]]


def store_signature(root: Path) -> Signature:
    """``relative path → (mtime_ns, size)`` of every Markdown file of the store (cheap: stat only)."""
    out: Signature = {}
    for top in _STORE_DIRS:
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.endswith(".md") and not name.startswith("."):
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.stat(path)
                    except FileNotFoundError:
                        continue
                    out[os.path.relpath(path, root)] = (st.st_mtime_ns, st.st_size)
    return out


class Indexer:
    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        *,
        cache: EmbeddingCache | None = None,
        scan_interval_s: float | None = 5.0,
    ) -> None:
        self.ws = workspace
        self.embedder = embedder
        folder = workspace.root / INDEX_DIR
        self.db = IndexDB(folder / INDEX_FILE, embedder.model_id, embedder.dim)
        self.cache = cache if cache is not None or embedder.dim == 0 else EmbeddingCache(folder / CACHE_FILE)
        self.scan_interval_s = scan_interval_s
        self.status: ProviderStatus | None = None
        self._items: dict[str, D.Item] = {}
        self._streams: dict[str, list[tuple[tuple[str, str], str]]] = {}
        self._sig: Signature = {}
        self._paths: dict[str, list[str]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._busy = True
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, background: bool = True) -> None:
        """Reconcile with the store, listen to its writes, start the embedder and scanner threads."""
        with self.ws.lock:
            self.reconcile()
            self._sig = store_signature(self.ws.root)
            self.ws.listeners.append(self.on_change)
        if background:
            self._spawn("almanac-embed", self._work)
            if self.scan_interval_s:
                self._spawn("almanac-scan", self._scan_loop)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=30)
        with self.ws.lock:
            if self.on_change in self.ws.listeners:
                self.ws.listeners.remove(self.on_change)
        self.db.close()
        if self.cache is not None:
            self.cache.close()

    # -- the store → rows --------------------------------------------------------------------------

    def _catalog(self) -> list[D.Item]:
        items = [D.note_item(r) for r in self.ws.notes.values()]
        items += [D.log_item(r) for r in self.ws.logs.values()]
        return [i for i in items if i is not None]

    def reconcile(self) -> int:
        """Rewrite the rows that differ from the store (by content hash); returns memories touched."""
        with self.ws.lock:
            items = self._catalog()
            self._items = {i.id: i for i in items}
            self._streams = {
                key: [(D.order_key(i), i.id) for i in members] for key, members in D.streams(items).items()
            }
            wanted: dict[str, list[D.ChunkDoc]] = {}
            for doc in D.all_docs(items):
                wanted.setdefault(doc.memory, []).append(doc)
            have = self.db.chunk_hashes()
            touched = 0
            for memory, docs in wanted.items():
                if {d.chunk: d.hash for d in docs} != have.pop(memory, None):
                    touched += self.db.put_memory(memory, docs, D.wikilinks(self._items[memory].text))
            for memory in have:
                touched += self.db.delete_memory(memory)
            facts = {f.memory: f for r in self.ws.facts.records.values() if (f := D.fact_doc(r))}
            stored = self.db.fact_hashes()
            for memory, fact in facts.items():
                if stored.pop(memory, None) != fact.hash:
                    touched += self.db.put_fact(fact)
            for memory in stored:
                touched += self.db.delete_fact(memory)
            self._paths.clear()
        self._wake.set()
        return touched

    def on_change(self, memory_id: str) -> None:
        """A workspace listener: re-index one memory (and its neighbours) after a durable write."""
        kind = ids.kind_of(memory_id)
        if kind == "fact":
            record = self.ws.facts.records.get(memory_id)
            doc = None if record is None else D.fact_doc(record)
            if doc is None:
                self.db.delete_fact(memory_id)
            else:
                self.db.put_fact(doc)
            self._restat(self._files_under("facts"))
        else:
            self._reindex_item(memory_id)
        self._wake.set()

    def _current_item(self, memory_id: str) -> D.Item | None:
        note = self.ws.notes.get(memory_id)
        if note is not None:
            return D.note_item(note)
        entry = self.ws.logs.get(memory_id)
        return None if entry is None else D.log_item(entry)

    def _reindex_item(self, memory_id: str) -> None:
        touched = {memory_id}
        old = self._items.pop(memory_id, None)
        if old is not None:
            members = self._streams.get(old.stream, [])
            at = bisect.bisect_left(members, (D.order_key(old), old.id))
            if at < len(members) and members[at][1] == old.id:
                touched.update(m for _, m in members[max(at - 1, 0) : at + 2])
                del members[at]
        new = self._current_item(memory_id)
        if new is not None:
            self._items[memory_id] = new
            members = self._streams.setdefault(new.stream, [])
            entry = (D.order_key(new), new.id)
            at = bisect.bisect_left(members, entry)
            members.insert(at, entry)
            touched.update(m for _, m in members[max(at - 1, 0) : at + 2])
        for memory in touched:
            item = self._items.get(memory)
            if item is None:
                self.db.delete_memory(memory)
                continue
            before, after = self._around(item)
            self.db.put_memory(memory, D.item_docs(item, before, after), D.wikilinks(item.text))
        self._restat(self._item_files(memory_id))

    def _around(self, item: D.Item) -> tuple[D.Item | None, D.Item | None]:
        members = self._streams[item.stream]
        at = bisect.bisect_left(members, (D.order_key(item), item.id))
        before = self._items[members[at - 1][1]] if at > 0 else None
        after = self._items[members[at + 1][1]] if at + 1 < len(members) else None
        return before, after

    # -- hand edits --------------------------------------------------------------------------------

    def _files_under(self, top: str) -> list[str]:
        base = self.ws.root / top
        known = [p for p in self._sig if p.startswith(top + os.sep)]
        found = [os.path.relpath(p, self.ws.root) for p in base.glob("*.md")] if base.is_dir() else []
        return sorted(set(known) | set(found))

    def _item_files(self, memory_id: str) -> list[str]:
        paths = list(self._paths.get(memory_id, ()))
        note = self.ws.notes.get(memory_id)
        entry = self.ws.logs.get(memory_id)
        if note is not None:
            now = [os.path.relpath(self.ws.note_path(note), self.ws.root)]
        elif entry is not None:
            now = [
                os.path.relpath(self.ws.log_file(entry.day, state), self.ws.root)
                for state in (State.LIVE, State.RETIRED)
            ]
        else:
            now = []
        self._paths[memory_id] = now
        return paths + now

    def _restat(self, rels: list[str]) -> None:
        for rel in rels:
            try:
                st = os.stat(self.ws.root / rel)
            except FileNotFoundError:
                self._sig.pop(rel, None)
            else:
                self._sig[rel] = (st.st_mtime_ns, st.st_size)

    def scan_once(self) -> bool:
        """Pick up hand edits: if any store file changed behind the engine's back, reload and reconcile."""
        if store_signature(self.ws.root) == self._sig:
            return False
        with self.ws.lock:
            self.ws.load()
            self.reconcile()
            self._sig = store_signature(self.ws.root)
        log.info("picked up hand edits in %s", self.ws.root)
        return True

    def _scan_loop(self) -> None:
        assert self.scan_interval_s is not None
        while not self._stop.wait(self.scan_interval_s):
            try:
                self.scan_once()
            except Exception:  # a bad scan must not kill the thread; the next one retries
                log.exception("scanning the workspace for hand edits failed")

    # -- background embedding ----------------------------------------------------------------------

    def _embed(self, table: str) -> int:
        rows = self.db.pending(table, _BATCH)
        if not rows:
            return 0
        texts = [t for _, t in rows]
        if self.cache is not None:
            vectors = embed_documents_cached(self.embedder, self.cache, texts)
        else:
            vectors = self.embedder.embed_documents(texts)
        self.db.put_vectors(table, [(r, t, v) for (r, t), v in zip(rows, vectors, strict=True)])
        return len(rows)

    def work_once(self) -> int:
        """One round of background work; returns how much was done (0 when idle)."""
        done = 0
        if self.db.vectors and self.status is not None and self.status.ready:
            done += self._embed("chunks") + self._embed("facts")
        for key in self.db.dirty_groups(_BATCH):
            self.db.refresh_group(key)
            done += 1
        return done

    def _work(self) -> None:
        self.status = self.embedder.probe()
        if not self.status.ready:
            log.warning("embedding provider %s: %s", self.status.provider, self.status.detail)
        while not self._stop.is_set():
            try:
                done = self.work_once()
            except Exception:
                log.exception("background indexing failed; retrying shortly")
                done = 0
                self._stop.wait(1.0)
            if done:
                continue
            with self._idle:
                self._busy = False
                self._idle.notify_all()
            self._wake.wait(30.0)
            with self._idle:
                self._busy = True
                self._wake.clear()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until the background thread has nothing left to do (True) or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._busy or self._wake.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.05))
            return True

    def backlog(self) -> int:
        counts = self.db.reader.counts()
        return counts["chunks_pending"] + counts["facts_pending"]
