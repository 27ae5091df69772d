"""Keeping the index in step with the store: writes, hand edits, and background embedding.

- Every durable write calls :meth:`Indexer.on_change` (a workspace listener): the memory's FTS
  rows — and its neighbours', whose context names it — are written at once, so a fresh write is
  found by its words straight away (``recall:fresh-facts``). A new memory's call is made by the
  group commit's index applier, in the order the writes were made, once the write is acknowledged
  (:mod:`engine.store.commit`); a read waits for it first (:meth:`Indexer.settled`). Every other
  write calls it under the workspace lock.
- On start, :meth:`Indexer.reconcile` compares every row's content hash with what the store
  says it should be and rewrites only the difference (``store:hand-edits``); while running, a
  cheap periodic scan of file sizes and mtimes notices edits made by hand, reloads the catalog
  and reconciles again.
- A background thread embeds whatever is pending and refreshes session rows
  (``embed:background``); the write path never waits for it.
- A server starts with ``catch_up_in_background``: the start-up reconcile runs in a thread
  while the engine already answers (:attr:`Indexer.progress` says how far it is). Writes made
  meanwhile are indexed at once and the catch-up leaves their rows alone.
- A memory whose text is larger than ``max_item_bytes`` stays in the store but is not indexed;
  :attr:`Indexer.too_large` names its file.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from engine import words
from engine.embed.base import Embedder, ProviderStatus, Vector
from engine.embed.cache import EmbeddingCache, embed_documents_cached
from engine.index import docs as index_docs
from engine.index import mentions, schema, voices
from engine.index.db import IndexDB
from engine.index.signature import Signature, clean_mark, code_digest, mark_holds, store_signature
from engine.index.vectors import contextual_vector
from engine.store import cold, ids
from engine.store.layout import CACHE
from engine.store.model import State
from engine.store.workspace import Workspace

log = logging.getLogger("almanac.engine.index")

INDEX_DIR = ".index"
INDEX_FILE = "index.sqlite"
#: The embedding cache lives beside the index, not in it: ``--reindex`` deletes ``.index/`` only.
CACHE_DIR = CACHE  # the store's folder of derived data (engine.store.workspace)
CACHE_FILE = "embeddings.sqlite"
_BATCH = 64
#: Texts embedded at once by the background thread, between two looks at whether to stop.
_EMBED_STEP = 16

#: A memory larger than this (UTF-8 bytes of its text) is kept in the store but not indexed.
MAX_ITEM_BYTES = 1_000_000
#: At most this many memories' writers (:mod:`.voices`) are worked out by a stop so that it can
#: leave its clean mark (≈ 0.06 ms each); with more left, the stop leaves none and the next start
#: compares everything.
_UNVOICED_AT_STOP = 4096
#: How long :meth:`Indexer.stop` waits for its threads in all (they are daemons; a stuck embedder
#: call must not hold a shutdown).
STOP_TIMEOUT_S = 2.0

#: The code that turns the store's files into rows: a clean stop's mark names it, so rows made by
#: other code are reconciled at the next start.
_ROW_CODE = code_digest((index_docs, mentions, schema, voices, words, cold))


class _Halted(Exception):
    """A background thread gave up waiting for the workspace lock because the engine is stopping."""


@dataclass(frozen=True)
class TooLarge:
    path: str  # relative to the workspace
    bytes: int


@dataclass(frozen=True)
class Progress:
    """The start-up reconcile: ``catching_up`` until every memory of the store has been compared."""

    state: str  # catching_up | ready | failed (the next hand-edit scan retries)
    done: int
    total: int

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "done": self.done, "total": self.total}


def cache_path(root: Path) -> Path:
    """``.cache/embeddings.sqlite`` (a cache left in ``.index/`` by an older engine is moved there)."""
    path = root / CACHE_DIR / CACHE_FILE
    old = root / INDEX_DIR / CACHE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() and old.exists():
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{old}{suffix}").exists():
                os.replace(f"{old}{suffix}", f"{path}{suffix}")
    return path


#: How long the background thread waits, once woken by a write, before it works: the call that
#: wrote is answered first, and a burst of writes is embedded in one round, waking the thread once.
SETTLE_S = 0.05


class Indexer:
    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        *,
        cache: EmbeddingCache | None = None,
        scan_interval_s: float | None = 5.0,
        max_item_bytes: int = MAX_ITEM_BYTES,
        settle_s: float = SETTLE_S,
    ) -> None:
        self.ws = workspace
        self.settle_s = settle_s
        self.max_item_bytes = max_item_bytes
        self.too_large: dict[str, TooLarge] = {}
        self.progress = Progress("catching_up", 0, 0)
        self._catching_up = False
        self._dirty: set[str] = set()  # memories written while catching up: the catch-up skips them
        self.embedder = embedder
        folder = workspace.root / INDEX_DIR
        self.db = IndexDB(folder / INDEX_FILE, embedder.model_id, embedder.dim)
        self.cache = (
            cache if cache is not None or embedder.dim == 0 else EmbeddingCache(cache_path(workspace.root))
        )
        self.scan_interval_s = scan_interval_s
        self.status: ProviderStatus | None = None
        self._items: dict[str, index_docs.Item] = {}
        self._streams: dict[str, list[tuple[tuple[str, str], str]]] = {}
        self._days: dict[str, date | None] = {}  # the day each memory is about (docs.carried_day)
        self._turns: dict[str, voices.Turn] = {}  # each memory as engine.index.voices reads it
        self._unvoiced: set[str] = set()  # memories whose writer is to be worked out (again)
        self._sig: Signature = {}
        self._in_step = False  # the start-up reconcile finished: the rows match the store
        self._paths: dict[str, list[str]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        # Orders the cache's forgetting (after a permanent deletion) with storing fresh vectors: a
        # text read for embedding before a deletion must not land in the cache after it.
        self._forgetting = threading.Lock()
        self._forgotten = 0  # how many times the cache forgot; an embedding round notes it first
        self._idle = threading.Condition()
        self._busy = True
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, background: bool = True, catch_up_in_background: bool = False) -> None:
        """Reconcile with the store, listen to its writes, start the embedder and scanner threads.

        With ``catch_up_in_background`` this returns at once and the reconcile runs in a thread
        (then the scanner starts); until it is done, recall answers from what the index has.
        """
        if catch_up_in_background:
            self._spawn("almanac-catch-up", self._catch_up_then_scan)
        else:
            with self.ws.lock:
                self.reconcile()
                self._sig = store_signature(self.ws.root)
                self.ws.listeners.append(self.on_change)
        if background:
            self._spawn("almanac-embed", self._work)
            if self.scan_interval_s and not catch_up_in_background:
                self._spawn("almanac-scan", self._scan_loop)

    def _catch_up_then_scan(self) -> None:
        try:
            self.catch_up()
        except _Halted:
            return
        except Exception:
            log.exception("the start-up reconcile failed; the next hand-edit scan retries it")
            self._catching_up = False
            self._sig = {}  # differs from any store: the first scan reconciles everything
            self.progress = Progress("failed", self.progress.done, self.progress.total)
        if self.scan_interval_s and not self._stop.is_set():
            self._scan_loop()

    def catch_up(self) -> int:
        """The start-up reconcile, holding the workspace lock only for moments (writes go on)."""
        with self._locked():
            items, facts = self._snapshot()
            self._sig = store_signature(self.ws.root)
            in_step = self._left_in_step(self._sig)
            self._dirty = set()
            self._catching_up = True
            if self.on_change not in self.ws.listeners:
                self.ws.listeners.append(self.on_change)
        try:
            touched = 0 if in_step else self._apply(items, facts, self._locked)
            self._in_step = self.progress.state == "ready"
        finally:
            self._catching_up = False  # a plain flag: on_change reads it under the lock
            self._dirty = set()
        self._wake.set()
        return touched

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The workspace lock for a background thread: gives up (:class:`_Halted`) on :meth:`halt`."""
        while not self.ws.lock.acquire(timeout=0.05):
            if self._stop.is_set():
                raise _Halted
        try:
            yield
        finally:
            self.ws.lock.release()

    def halt(self) -> None:
        """Ask the threads to stop (returns at once; :meth:`stop` waits for them)."""
        self._stop.set()
        self._wake.set()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stop the threads (waiting at most ``timeout_s`` in all) and close the databases.

        Returns False when a thread is still busy (say, in a hung embedder call); the databases are
        then left open for it — the process is ending, and the index is derived data anyway.
        """
        self.halt()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        with self.ws.lock:
            if self.on_change in self.ws.listeners:
                self.ws.listeners.remove(self.on_change)
        if any(t.is_alive() for t in self._threads):
            log.warning("index threads still busy after %.0f s; leaving them to the exit", timeout_s)
            return False
        with self.ws.lock:
            if (
                self._in_step
                and len(self._unvoiced) <= _UNVOICED_AT_STOP
                and store_signature(self.ws.root) == self._sig
            ):
                # nothing changed that the rows miss (once the writers left to work out are)
                self._refresh_voices(None)
                self.db.leave_mark(
                    clean_mark(self._sig, _ROW_CODE, self._settings(), time.time_ns(), self._read)
                )
        self.db.close()
        if self.cache is not None:
            self.cache.close()
        return True

    # -- the store → rows --------------------------------------------------------------------------

    def _fits(self, item: index_docs.Item | None, path: Path) -> index_docs.Item | None:
        """``item``, or None (and named in :attr:`too_large`) when it is too large to index."""
        if item is None:
            return None
        self.too_large.pop(item.id, None)
        if len(item.text) * 4 <= self.max_item_bytes:  # no need to count the bytes
            return item
        size = len(item.text.encode("utf-8", "surrogatepass"))
        if size <= self.max_item_bytes:
            return item
        self.too_large[item.id] = TooLarge(os.path.relpath(path, self.ws.root), size)
        return None

    def _catalog(self) -> list[index_docs.Item]:
        self.too_large.clear()
        items = [self._fits(index_docs.note_item(r), self.ws.note_path(r)) for r in self.ws.notes.values()]
        items += [
            self._fits(index_docs.log_item(r), self.ws.log_file(r.day, r.state))
            for r in self.ws.logs.values()
        ]
        return [i for i in items if i is not None]

    def _snapshot(self) -> tuple[list[index_docs.Item], dict[str, index_docs.FactDoc]]:
        """What the index should hold (call under the workspace lock); sets the stream bookkeeping."""
        items = self._catalog()
        self._items = {i.id: i for i in items}
        by_stream = index_docs.streams(items)
        self._streams = {
            key: [(index_docs.order_key(i), i.id) for i in members] for key, members in by_stream.items()
        }
        self._days = {
            i.id: day
            for members in by_stream.values()
            for i, day in zip(members, index_docs.stream_days(members), strict=True)
        }
        self._paths.clear()
        self._turns.clear()
        facts = {f.memory: f for r in self.ws.facts.records.values() if (f := index_docs.fact_doc(r))}
        return items, facts

    def reconcile(self) -> int:
        """Rewrite the rows that differ from the store (by content hash); returns memories touched."""
        with self.ws.lock:
            items, facts = self._snapshot()
            in_step = self._left_in_step(store_signature(self.ws.root))
            touched = 0 if in_step else self._apply(items, facts, contextlib.nullcontext)
            self._in_step = self.progress.state == "ready"
        self._wake.set()
        return touched

    def _settings(self) -> str:
        return f"max_item_bytes={self.max_item_bytes}"

    def _read(self, rel: str) -> bytes:
        return (self.ws.root / rel).read_bytes()

    def _left_in_step(self, now: Signature) -> bool:
        """Whether a clean stop left the rows in step with the store whose files are ``now`` (its
        mark, see :mod:`engine.index.signature`); the mark is taken away either way, so that a
        stop that is not clean leaves none. Call with the snapshot taken, under the workspace lock."""
        found = self.db.take_mark()
        if found is None or not mark_holds(found, now, _ROW_CODE, self._settings(), self._read):
            return False
        total = len(self._items) + len(self.ws.facts.records)
        self.progress = Progress("ready", total, total)
        return True

    def _apply(
        self,
        items: list[index_docs.Item],
        facts: dict[str, index_docs.FactDoc],
        guard: Callable[[], AbstractContextManager[Any]],
    ) -> int:
        """Make the rows match ``items`` and ``facts``: each row written under ``guard``, and not
        at all if a write changed that memory since the snapshot (``_dirty``)."""
        have = self.db.chunk_hashes()
        stored = self.db.fact_hashes()
        total, done, touched = len(items) + len(facts), 0, 0
        self.progress = Progress("catching_up", 0, total)
        for members in index_docs.streams(items).values():
            days = index_docs.stream_days(members)
            for i, item in enumerate(members):
                if self._stop.is_set():
                    return touched
                docs = index_docs.item_docs(item, *index_docs.around(members, days, i))
                if {d.chunk: d.hash for d in docs} != have.pop(item.id, None):
                    with guard():
                        if item.id not in self._dirty:
                            touched += self.db.put_memory(item.id, docs, index_docs.wikilinks(item.text))
                done += 1
                self.progress = Progress("catching_up", done, total)
        for memory in have:
            with guard():
                if memory not in self._dirty:
                    touched += self.db.delete_memory(memory)
        for memory, fact in facts.items():
            if stored.pop(memory, None) != fact.hash:
                with guard():
                    if memory not in self._dirty:
                        touched += self.db.put_fact(fact)
            done += 1
            self.progress = Progress("catching_up", done, total)
        for memory in stored:
            with guard():
                if memory not in self._dirty:
                    touched += self.db.delete_fact(memory)
        with guard():
            self._unvoiced.update(self._items)  # the background thread works them out
        self.progress = Progress("ready", total, total)
        return touched

    def on_change(self, memory_id: str) -> None:
        """A workspace listener: re-index one memory (and its neighbours) after a durable write."""
        kind = ids.kind_of(memory_id)
        if kind == "fact":
            with self.ws.view:  # the next writes' in-memory state may be changing meanwhile
                record = self.ws.facts.records.get(memory_id)
                doc = None if record is None else index_docs.fact_doc(record)
            if doc is None:
                self.db.delete_fact(memory_id)
            else:
                self.db.put_fact(doc)
            if self._catching_up:
                self._dirty.add(memory_id)
            self._restat(self._files_under("facts"))
        else:
            self._reindex_item(memory_id)
        if memory_id in self.ws.deleted:
            # a session's text holds its members' words until it is refreshed (the background
            # thread does that a moment later): refresh now, so the purge leaves no copy behind
            self._refresh_sessions(until_none_left=True)
            self._refresh_voices(None)  # the neighbours' writers, read from its words too
            self.db.purge()
            self._forget_cached()
        self._wake.set()

    def _forget_cached(self) -> None:
        """Drop every cached vector whose text is no longer indexed (after a permanent deletion)."""
        if self.cache is None:
            return
        with self._forgetting:
            self._forgotten += 1
            self.cache.keep_only(self.db.texts())

    def _cache_vectors(self, since: int, model_id: str, dim: int, pairs: list[tuple[str, Vector]]) -> None:
        """Store fresh vectors in the cache — if the cache forgot anything since the round began
        (``since``), only those whose text is still indexed: the deleted one's were read before."""
        assert self.cache is not None
        with self._forgetting:
            if self._forgotten != since:
                indexed = self.db.texts()
                pairs = [(text, vector) for text, vector in pairs if text in indexed]
            self.cache.put_many(model_id, dim, pairs)

    def _current_item(self, memory_id: str) -> index_docs.Item | None:
        note = self.ws.notes.get(memory_id)
        if note is not None:
            return self._fits(index_docs.note_item(note), self.ws.note_path(note))
        entry = self.ws.logs.get(memory_id)
        if entry is None:
            return None
        return self._fits(index_docs.log_item(entry), self.ws.log_file(entry.day, entry.state))

    def _reindex_item(self, memory_id: str) -> None:
        touched = {memory_id}
        old = self._items.pop(memory_id, None)
        self._days.pop(memory_id, None)
        if old is not None:
            members = self._streams.get(old.stream, [])
            at = bisect.bisect_left(members, (index_docs.order_key(old), old.id))
            if at < len(members) and members[at][1] == old.id:
                touched.update(m for _, m in members[max(at - 1, 0) : at + 2])
                del members[at]
                touched |= self._carry(old.stream, at)
                self._unvoiced.update(m for _, m in members[max(at - voices.WINDOW, 0) : at + voices.WINDOW])
        self._turns.pop(memory_id, None)
        new = self._current_item(memory_id)
        if new is not None:
            self._items[memory_id] = new
            members = self._streams.setdefault(new.stream, [])
            entry = (index_docs.order_key(new), new.id)
            at = bisect.bisect_left(members, entry)
            members.insert(at, entry)
            touched.update(m for _, m in members[max(at - 1, 0) : at + 2])
            touched |= self._carry(new.stream, at)
            self._unvoiced.update(m for _, m in members[max(at - voices.WINDOW, 0) : at + voices.WINDOW + 1])
        if self._catching_up:
            self._dirty.update(touched)
        for memory in touched:
            item = self._items.get(memory)
            if item is None:
                self.db.delete_memory(memory)
                continue
            self.db.put_memory(
                memory, index_docs.item_docs(item, *self._around(item)), index_docs.wikilinks(item.text)
            )
        self._restat(self._item_files(memory_id))

    def _carry(self, stream: str, at: int) -> set[str]:
        """Recompute the days carried along ``stream`` (:func:`~engine.index.docs.carried_day`)
        from position ``at`` until they stop changing; returns the memories whose day changed,
        with their neighbours (whose context depends on it)."""
        members = self._streams.get(stream, [])
        changed: set[str] = set()
        for i in range(at, len(members)):
            key = members[i][1]
            before = self._items[members[i - 1][1]] if i > 0 else None
            day = index_docs.carried_day(
                self._items[key], before, None if before is None else self._days.get(before.id)
            )
            if i > at and key in self._days and self._days[key] == day:
                break  # from here on every day is what it was
            self._days[key] = day
            changed.update(m for _, m in members[max(i - 1, 0) : i + 2])
        return changed

    def _around(
        self, item: index_docs.Item
    ) -> tuple[index_docs.Item | None, index_docs.Item | None, index_docs.Days]:
        members = self._streams[item.stream]
        at = bisect.bisect_left(members, (index_docs.order_key(item), item.id))
        before = self._items[members[at - 1][1]] if at > 0 else None
        after = self._items[members[at + 1][1]] if at + 1 < len(members) else None
        days = self._days
        return (
            before,
            after,
            (
                None if before is None else days.get(before.id),
                days.get(item.id),
                None if after is None else days.get(after.id),
            ),
        )

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
        with self._locked():
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
            except _Halted:
                return
            except Exception:  # a bad scan must not kill the thread; the next one retries
                log.exception("scanning the workspace for hand edits failed")

    # -- background embedding ----------------------------------------------------------------------

    def _embed(self, table: str) -> int:
        """Embed a batch of what is pending, :data:`_EMBED_STEP` at a time: a stop waits for one step
        at most (a process being stopped — to move its workspace, say — is not held by a batch)."""
        with self._forgetting:
            since = self._forgotten  # noted BEFORE the texts are read (see _cache_vectors)
        rows = self.db.pending(table, _BATCH)
        done = 0
        for at in range(0, len(rows), _EMBED_STEP):
            if self._stop.is_set():
                raise _Halted
            done += self._embed_rows(table, since, rows[at : at + _EMBED_STEP])
        return done

    def _embed_rows(self, table: str, since: int, rows: list[tuple[int, str, str]]) -> int:
        texts = list(dict.fromkeys(t for _, read, own in rows for t in (read, own)))
        if self.cache is not None:
            store = functools.partial(self._cache_vectors, since)
            vectors = embed_documents_cached(self.embedder, self.cache, texts, store=store)
        else:
            vectors = self.embedder.embed_documents(texts)
        of = dict(zip(texts, vectors, strict=True))
        self.db.put_vectors(table, [(r, read, contextual_vector(of[own], of[read])) for r, read, own in rows])
        return len(rows)

    def work_once(self) -> int:
        """One round of background work; returns how much was done (0 when idle)."""
        done = 0
        if self.db.vectors and self.status is not None and self.status.ready:
            done += self._embed("chunks") + self._embed("facts")
        return done + self._refresh_sessions(until_none_left=False) + self._refresh_voices(_BATCH)

    def _refresh_sessions(self, *, until_none_left: bool) -> int:
        """Refresh the text of sessions whose members changed, a batch of :data:`_BATCH` at a time:
        one batch, or batches ``until_none_left``; returns how many were refreshed."""
        done = 0
        while keys := self.db.dirty_groups(_BATCH):
            for key in keys:
                self.db.refresh_group(key)
            done += len(keys)
            if not until_none_left:
                break
        return done

    def _refresh_voices(self, limit: int | None) -> int:
        """Work out who wrote the memories whose neighbourhood changed (:mod:`.voices`): ``limit``
        of them (all with None); returns how many."""
        if not self._unvoiced:
            return 0
        with self._locked():
            batch = list(itertools.islice(self._unvoiced, limit))
            self._unvoiced.difference_update(batch)
            self.db.put_voices([(m, self._voice_of(m)) for m in batch if m in self._items])
        return len(batch)

    def _turn(self, memory: str) -> voices.Turn:
        turn = self._turns.get(memory)
        if turn is None:
            turn = self._turns[memory] = voices.turn_of(self._items[memory].text)
        return turn

    def _voice_of(self, memory: str) -> str:
        """Who wrote ``memory``, encoded ("" when not worked out): from the memories of its stream
        within :data:`~engine.index.voices.WINDOW` places of it, in the same sitting."""
        item = self._items[memory]
        members = self._streams[item.stream]
        at = bisect.bisect_left(members, (index_docs.order_key(item), item.id))
        sitting = functools.partial(self._one_sitting, members)
        lo = at
        while lo > 0 and at - lo < voices.WINDOW and sitting(lo - 1):
            lo -= 1
        hi = at
        while hi + 1 < len(members) and hi - at < voices.WINDOW and sitting(hi):
            hi += 1
        turns = [self._turn(m) for _, m in members[lo : hi + 1]]
        return voices.encode(voices.voice(turns, at - lo))

    def _one_sitting(self, members: list[tuple[tuple[str, str], str]], i: int) -> bool:
        """Whether ``members[i]`` and the one after it were written in one sitting."""
        return index_docs.same_sitting(self._items[members[i][1]], self._items[members[i + 1][1]])

    def _work(self) -> None:
        self.status = self.embedder.probe()
        if not self.status.ready:
            log.warning("embedding provider %s: %s", self.status.provider, self.status.detail)
        while not self._stop.is_set():
            try:
                done = self.work_once()
            except _Halted:
                return  # stopped while it waited for the lock (the stop holds it): nothing failed
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
            # Let the write that woke us answer, and the rest of its burst land, before working:
            # writes meanwhile set the event without waking anyone, and one round takes them all.
            self._stop.wait(self.settle_s)
            with self._idle:
                self._wake.clear()

    def settled(self) -> None:
        """Return once the index has every write acknowledged so far (read-your-writes: a read of
        the index calls this first; see :mod:`engine.store.commit`). Normally at once."""
        self.ws.commits.wait_indexed()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until the background threads have nothing left to do (True) or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        self.settled()
        with self._idle:
            while self._busy or self._wake.is_set() or self.progress.state == "catching_up":
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.05))
            return True

    def backlog(self) -> int:
        counts = self.db.reader.counts()
        return counts["chunks_pending"] + counts["facts_pending"]
