"""``get_context``: facts first, then notes by hybrid search, packed into the budget (``recall:*``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.ageing.lifecycle import Lifecycle
from engine.embed.recent import DEFAULT_SIZE as RECENT_QUERIES
from engine.embed.recent import RecentQueries
from engine.errors import BadArgument
from engine.index.indexer import Indexer
from engine.index.schema import FACT_WEIGHTS
from engine.recall import budget as budgeting
from engine.recall.freshness import LEXICAL_WEIGHT, rerank
from engine.recall.fusion import Candidate, Weights, fuse
from engine.recall.lexical import dated_terms, lexical_score
from engine.recall.lists import Listing, asked_class
from engine.recall.query import Query, names_person, parse_query, quote, without_names
from engine.recall.relevance import MATCH_FLOOR, MIN_MATCH_SCORE, confidence, query_confidence
from engine.recall.scopes import FactHit, counterparts, scope_rule
from engine.recall.search import KEYWORD_BUDGET, Hit, QVec, graph_hits, rank_chunks
from engine.scope import Caller, Limit, read_scope, shown
from engine.settings import Loaded
from engine.store.cold import BANNER

log = logging.getLogger("almanac.engine.recall")


@dataclass(frozen=True)
class RecallSettings:
    max_tokens_default: int = 800
    max_tokens_limit: int = 4000
    min_tokens: int = 100
    facts_share: float = 0.5
    facts_for_query: int = 12
    facts_without_query: int = 20
    notes_limit: int = 20
    nearest_on_miss: int = 10  # as many as the first ten of a hit: a missed match still shows
    min_match_score: float = MIN_MATCH_SCORE
    match_floor: float = MATCH_FLOOR  # get_context lists no search match below it (recall:honest-miss)
    fact_min_cosine: float = 0.5
    include_archived: bool = False
    semantic: bool = True  # False: keyword search only
    depth: int = 100
    keyword_budget: int = KEYWORD_BUDGET  # rows bm25 may score per query (engine.index.keywords)
    overlap_embedding: bool = True  # embed the query in a thread while the keyword searches run
    recent_queries: int = RECENT_QUERIES  # query vectors kept for a repeated query (0: none)
    weights: Weights = field(default_factory=Weights)
    lexical_weight: float = LEXICAL_WEIGHT  # keyword coverage added after fusion (engine.recall.freshness)
    listing_weight: float = 0.5  # a list question's lift of the named person's memories (engine.recall.lists)
    listing_depth: int = 50  # … and how many memories naming the class's members join the candidates


@dataclass(frozen=True)
class Searched:
    """A note search: ranked hits, how they were matched, and whether anything closely matched."""

    hits: tuple[Hit, ...]
    retrieval: str
    relevant: bool
    confidence: float


class Recall:
    def __init__(
        self,
        indexer: Indexer,
        settings: RecallSettings | None = None,
        ageing: Lifecycle | None = None,
        engine_settings: Loaded | None = None,
    ) -> None:
        self.indexer = indexer
        self.db = indexer.db.reader
        self.settings = settings or RecallSettings()
        self.ageing = ageing  # decay in ranking; citations and the retrieval log after get_context
        self.engine_settings = engine_settings  # what memory_status reports, with each value's origin
        self.recent = RecentQueries(self.settings.recent_queries)  # a repeated query is embedded once

    # -- the pieces --------------------------------------------------------------------------------

    def _wants_vector(self, query: Query) -> bool:
        status = self.indexer.status
        if (
            query.empty
            or not self.settings.semantic
            or not self.db.vectors
            or status is None
            or not status.ready
        ):
            return False
        return bool(self.db.any_embedded())  # nothing embedded yet: keyword mode until it is

    def dense_text(self, query: Query, known: set[str] | None = None) -> str:
        """What the query vector embeds: the query without the names this workspace knows.

        A name says whom a question is about, and whether a memory repeats it depends only on how
        it happens to be worded ("Caroline: I …", "On 8 May, Caroline said …" or just "I …"); the
        keyword search and the person prior match it, the vector matches the rest of the question
        (docs/recall.md). A name the workspace has never seen stays: nothing here matches it anyway.
        """
        return without_names(query.text, self._known_names(query) if known is None else known)

    def query_vector(self, text: str) -> QVec:
        """The vector a search for ``text`` embeds (None when recall answers by keywords)."""
        query = parse_query(text)
        return self._embed(self.dense_text(query)) if self._wants_vector(query) else None

    def _embed(self, text: str) -> QVec:
        try:
            vec: np.ndarray[Any, Any] = self.recent.vector(self.indexer.embedder, text)
            return vec
        except Exception as exc:  # a failing provider degrades recall to keywords, never breaks it
            log.warning("query embedding failed, answering by keywords: %s", exc)
            return None

    def _start_embedding(self, query: Query, known: set[str] | None = None) -> Callable[[], QVec]:
        """The query vector, computed in a worker thread while the caller runs the keyword searches
        (SQLite and the ONNX model both release the GIL); call the result to wait for it. A vector
        among the recent queries' is handed back at once (no hop to the worker thread)."""
        if not self._wants_vector(query):
            return lambda: None
        text = self.dense_text(query, known)
        kept = self.recent.get(self.indexer.embedder.model_id, text)
        if kept is not None:
            return lambda: kept
        if not self.settings.overlap_embedding:
            vec = self._embed(text)
            return lambda: vec
        future = _pool().submit(self._embed, text)
        return future.result

    def _known_names(self, query: Query) -> set[str]:
        def known(name: str) -> bool:
            return self.db.exists("chunks", quote(name)) or self.db.exists("facts", quote(name))

        return {name for name in query.names if known(name)}

    def _listing(self, query: Query) -> Listing | None:
        """What a list question about a person adds to the search (:mod:`engine.recall.lists`):
        None unless the query names someone and asks for a class of things (0 weight: never)."""
        settings = self.settings
        asked = asked_class(query.terms) if query.names and settings.listing_weight > 0 else None
        if asked is None:
            return None
        return Listing(asked.members, settings.listing_weight, settings.listing_depth)

    def search(
        self,
        text: str | None,
        *,
        scope: str | None = None,
        include_archived: bool = False,
        limit: int | None = None,
        qvec: QVec | Callable[[], QVec] = None,
        floor: float = 0.0,
    ) -> Searched:
        """Notes and log entries for ``text``, best first (what ``get_context`` packs); with a
        ``floor``, no match whose confidence is below it (nor graph items linked from one)."""
        self.indexer.settled()
        query = parse_query(text)
        within = None if scope is None else Limit(scope)
        return self._search(query, within, include_archived, limit, qvec, self._known_names(query), floor)

    def _search(
        self,
        query: Query,
        scope: Limit | None,
        include_archived: bool,
        limit: int | None,
        qvec: QVec | Callable[[], QVec],
        known: set[str],
        floor: float = 0.0,
    ) -> Searched:
        """``known``: the names of ``query`` this workspace knows (:meth:`_known_names`)."""
        if query.empty:
            return Searched((), "facts", False, 0.0)
        vector = qvec if qvec is not None else self._start_embedding(query, known)

        def visible(state: str, item_scope: str | None) -> bool:
            return shown(state, item_scope, scope, include_archived)

        limit = limit or self.settings.notes_limit
        ranked = rank_chunks(
            self.db,
            query,
            vector,
            visible,
            depth=self.settings.depth,
            # the last terms re-sort a window as wide as get_context's, whatever ``limit`` is: the
            # first ten of a search and of get_context are then the same ten, in the same order
            limit=max(limit, self.settings.notes_limit),
            weights=self.settings.weights,
            budget=self.settings.keyword_budget,
            listing=self._listing(query),
        )
        if ranked.semantic:
            retrieval = "hybrid" if ranked.keyword else "semantic"
        else:
            retrieval = "keyword" if ranked.keyword else "facts"
        # ``known``: whom the query is about, covered by every memory
        best = [_match(query, h, known) for h in ranked.hits[:5]]
        conf = query_confidence(best, len(query.names) - len(known), len(query.names))
        decay_of = None
        if self.ageing is not None:
            ageing, now = self.ageing, self.ageing.clock()
            decay_of = lambda memory: ageing.decay_of(memory, now)  # noqa: E731
        found = rerank(ranked.hits, decay_of, lexical_weight=self.settings.lexical_weight)[:limit]
        below: set[str] = set()
        if floor > 0:  # the floor: a match this weak is never listed, however fresh or important
            # (its meaning alone clears it for most hits: the coverage is worked out for the rest)
            kept = tuple(
                h for h in found if confidence(0.0, h.cosine) >= floor or _match(query, h, known) >= floor
            )
            below = {h.memory for h in found} - {h.memory for h in kept}
            found = kept
        # a match the floor left out does not come back by a shared name (as a graph item, below
        # the matches it ranked above); a [[wikilink]] from a match that cleared it is followed
        graph = sorted(graph_hits(self.db, found, visible, query, exclude=below), key=lambda h: -h.score)
        hits = found + tuple(graph)  # best first: graph items score at most the last search hit
        return Searched(hits, retrieval, conf >= self.settings.min_match_score, conf)

    def facts(
        self,
        query: Query,
        qvec: np.ndarray[Any, Any] | None,
        scope: Limit | None,
        keyword: list[tuple[int, float]] | None = None,
    ) -> list[FactHit]:
        """The best-matching current facts (newest first without a query), scope rule applied.
        ``keyword``: :meth:`fact_keywords` for ``query``, if already searched."""
        self.indexer.settled()
        return self._facts(query, qvec, scope, keyword)

    def _facts(
        self,
        query: Query,
        qvec: np.ndarray[Any, Any] | None,
        scope: Limit | None,
        keyword: list[tuple[int, float]] | None,
    ) -> list[FactHit]:
        found: list[FactHit] = []
        if query.empty:
            limit = self.settings.facts_without_query
            rows = sorted(self.db.fact_rows().values(), key=lambda r: r.created, reverse=True)
            found = [FactHit(r, 1.0, 1.0) for r in rows]
        else:
            limit = self.settings.facts_for_query
            keyword = self.fact_keywords(query) if keyword is None else keyword
            nearest = self.db.knn("facts", qvec, 50) if qvec is not None else []
            near, bm25 = dict(nearest), dict(keyword)
            wanted = [r for r, _ in keyword] + [r for r, c in nearest if c >= self.settings.fact_min_cosine]
            rows_by_id = self.db.fact_rows(list(dict.fromkeys(wanted)))
            cands = [
                Candidate(
                    k, r.memory, "", bm25.get(k), near.get(k), k in near, names_person(query, r.subject)
                )
                for k, r in rows_by_id.items()
            ]
            for s in fuse(cands, None, self.settings.weights):
                row = rows_by_id[s.key]
                lex = lexical_score(
                    query.terms, f"{row.subject} {row.predicate} {row.object} {row.statement}"
                )
                found.append(FactHit(row, s.score, confidence(lex, s.cosine)))
        if scope is not None:
            rows = [h.row for h in found]
            twins = self.db.facts_by_memory(counterparts(rows, scope.scope)) if scope.unscoped else {}
            found = scope_rule(found, scope, twins)
        return found[:limit]

    def fact_keywords(self, query: Query) -> list[tuple[int, float]]:
        """The facts' keyword matches, ``(rowid, bm25)``: small rows, bm25 over all of them."""
        return self.db.fts("facts", query.fts, FACT_WEIGHTS, 50) if not query.empty else []

    # -- get_context -------------------------------------------------------------------------------

    def get_context(
        self,
        caller: Caller,
        query: str | None = None,
        scope: str | None = None,
        max_tokens: int | None = None,
        include_archived: bool | None = None,
    ) -> dict[str, Any]:
        settings = self.settings
        started = time.perf_counter()
        limit = read_scope(caller, scope)
        budget = settings.max_tokens_default if max_tokens is None else max_tokens
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise BadArgument("max_tokens must be a whole number of tokens")
        if budget < settings.min_tokens:
            raise BadArgument(
                f"max_tokens {budget} is below the minimum, {settings.min_tokens} (the smallest budget "
                f"a reply is packed into): use {settings.min_tokens} to {settings.max_tokens_limit} "
                f"(default {settings.max_tokens_default})"
            )
        if budget > settings.max_tokens_limit:
            raise BadArgument(
                f"max_tokens {budget} is above the maximum, {settings.max_tokens_limit}: use "
                f"{settings.min_tokens} to {settings.max_tokens_limit} "
                f"(default {settings.max_tokens_default})"
            )
        archived = settings.include_archived if include_archived is None else include_archived
        self.indexer.settled()  # every write acknowledged before this call is found
        parsed = parse_query(query)
        known = self._known_names(parsed)
        qvec = self._start_embedding(parsed, known)
        fact_keywords = self.fact_keywords(parsed)  # needs no vector: searched while it is made
        floor = settings.match_floor
        searched = self._search(parsed, limit, archived, None, qvec, known, floor)
        facts = self._facts(parsed, qvec(), limit, fact_keywords)
        hits = list(searched.hits)
        relevant = searched.relevant or any(f.confidence >= settings.min_match_score for f in facts)
        if not parsed.empty:
            facts = [f for f in facts if f.confidence >= floor]
        if not parsed.empty and not relevant:
            hits = [h for h in hits if h.reason != "graph"][: settings.nearest_on_miss]
        fact_items = [self._fact_item(f) for f in facts]
        note_items = [self._note_item(h) for h in hits]
        newest = self._newest_relevant(hits)
        envelope: dict[str, Any] = {
            "facts": [],
            "notes": [],
            "retrieval": searched.retrieval if not parsed.empty else "facts",
            "relevant": relevant,
            "tokens": budget,  # the reply's own count is never more: as many digits at most
            "dropped": {"count": len(fact_items) + len(note_items), "ids": []},
        }
        room = budget - budgeting.json_tokens(envelope)
        notes_room = room - int(room * settings.facts_share)

        def entry(item: dict[str, Any]) -> budgeting.Entry:
            tokens = budgeting.json_tokens(item) + 1
            if item["id"] != newest:
                return budgeting.Entry(item["id"], tokens, item["score"], item["reason"])
            # its smallest cut form is reserved before facts; worked out only when it may matter
            least = budgeting.smallest(item) if tokens > notes_room else tokens
            return budgeting.Entry(item["id"], tokens, item["score"], item["reason"], True, least)

        plan = budgeting.pack(
            [budgeting.Entry(i["id"], budgeting.json_tokens(i) + 1, i["score"], "fact") for i in fact_items],
            [entry(i) for i in note_items],
            room,
            facts_share=settings.facts_share,
            max_facts=len(fact_items),
        )
        by_id = {i["id"]: i for i in fact_items + note_items}
        notes = [by_id[i] for i in plan.notes]
        if plan.squeeze is not None:
            squeezed = [
                budgeting.squeeze(n, plan.squeeze[1]) if n["id"] == plan.squeeze[0] else n for n in notes
            ]
            notes = [n for n in squeezed if n is not None]
        reply, used = budgeting.fit(
            {
                **envelope,
                "facts": [by_id[i] for i in plan.facts],
                "notes": notes,
                "dropped": {"count": len(by_id) - len(plan.facts) - len(notes), "ids": list(plan.listed)},
            },
            budget,
            newest,
        )
        reply["tokens"] = used  # counted with ``tokens`` = budget: never less than the reply uses
        if self.ageing is not None:
            self.ageing.after_context(
                reply,
                query=query,
                scope=None if limit is None else limit.scope,
                latency_ms=(time.perf_counter() - started) * 1000,
                source=None if caller.connection_id else caller.connection or caller.client_name,
                connection_id=caller.connection_id,
            )
        return reply

    def _newest_relevant(self, hits: list[Hit]) -> str | None:
        relevant = [
            h
            for h in hits
            if confidence(h.lexical, h.cosine) >= self.settings.min_match_score and h.row.created
        ]
        if not relevant:
            return None
        return max(relevant, key=lambda h: (h.row.created or "", h.memory)).memory

    @staticmethod
    def _fact_item(hit: FactHit) -> dict[str, Any]:
        row = hit.row
        text, cut = budgeting.cut_text(row.statement or f"{row.subject} {row.predicate}: {row.object}")
        item: dict[str, Any] = {
            "id": row.memory,
            "kind": "fact",
            "text": text,
            "subject": row.subject,
            "predicate": row.predicate,
            "object": row.object,
            "score": round(hit.score, 4),
            "reason": "fact",
            "source": row.source,
            "created": row.created,
            "scope": row.scope,
            "tags": [],
        }
        if cut:
            item["cut"] = True
        if hit.scope_note:
            item["scope_note"] = hit.scope_note
        return item

    @staticmethod
    def _note_item(hit: Hit) -> dict[str, Any]:
        row = hit.row
        text, cut = budgeting.cut_text(row.text)
        item: dict[str, Any] = {
            "id": row.memory,
            "kind": row.kind,
            "text": text,
            "score": round(hit.score, 4),
            "reason": hit.reason,
            "source": row.source,
            "created": row.created,
            "scope": row.scope,
            "tags": row.tags.split("\n") if row.tags else [],
        }
        if cut or row.parts > 1:
            item["cut"] = True
        if row.state == "archived":
            item["archived"] = True
            item["banner"] = BANNER
        return item


def _match(query: Query, hit: Hit, known: set[str]) -> float:
    """A hit's match confidence (:func:`~engine.recall.relevance.confidence`): its keyword
    coverage (:func:`_coverage`) or its meaning, whichever is the stronger."""
    return confidence(_coverage(query.terms, hit, known), hit.cosine)


def _coverage(terms: tuple[str, ...], hit: Hit, known: set[str]) -> float:
    """Keyword coverage of a hit, the query's words that its days say (its ``dates``: a question
    "in June 2023" is covered by a memory of that month, whether its words say so or its day
    does) counting as found in it. For a query naming people the workspace knows, the names count
    as covered too, and the memory's neighbours (its ``context``) count with its own words — what
    was said about someone is often worded in the exchange around it, not repeated in it."""
    row = hit.row
    dated = dated_terms(terms, row.dates)
    if not known and not dated:
        return hit.lexical  # the words alone, as the hit was scored
    body = f"{row.text}\n{row.context}" if known else row.text
    return lexical_score(terms, body, row.tags.split("\n"), given=known | dated)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="almanac-query-embed")
        return _POOL
