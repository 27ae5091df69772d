"""The turn loop: load before a turn, save after it; the provider's failures never break a turn.

::

    async with MemoryProvider(AlmanacProvider.service(url, token), settings,
                              extract=openai_chat(base_url, "small-model")) as memory:
        block = await memory.before_turn(message)      # "" when off, unreachable or nothing relevant
        reply = await model(system_prompt + block, message)
        memory.after_turn(message, reply)             # returns at once; saves in the background

The automatic path is unscoped. :meth:`MemoryProvider.load` and :meth:`MemoryProvider.remember` are
the deliberate ones, which may be pinned to a session, agent or turn (``almanac.host.scope``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from almanac.host.block import assemble
from almanac.host.connection import AlmanacRefused, AlmanacUnavailable, Endpoint
from almanac.host.extract import extraction_messages, parse_facts
from almanac.host.openai import ChatFn
from almanac.host.providers.almanac import AlmanacProvider
from almanac.host.providers.base import Provider, ProviderState, Search
from almanac.host.retrieval_log import MAIN_CONTEXT, Retrieval, RetrievalLog
from almanac.host.scope import Scope
from almanac.host.settings import OP_LIMIT_S, HostSettings

log = logging.getLogger("almanac.host")

AUTO_SAVE_IMPORTANCE = 0.5


@dataclass(frozen=True)
class SaveStatus:
    """How the background saves went since the provider was entered (``MemoryProvider.status``)."""

    saved: int = 0
    """Facts stored in memory."""
    failed: int = 0
    """Turns whose save finally failed: the extraction failed, or a fact was refused, or did not
    land within ``save_timeout`` (each is also logged once, with this count)."""
    lost: int = 0
    """Facts the extraction produced that are not in memory (refused or never landed)."""
    pending: int = 0
    """Turns still being extracted or saved."""
    last_failure: str | None = None
    """Why the last failed save failed."""


class MemoryProvider:
    """A memory provider around an agent host's turns. Use it as an async context manager.

    ``provider`` is a :class:`~almanac.host.providers.Provider`, or an :class:`Endpoint` (Almanac).
    ``retrieval_log`` names the JSONL file that gets one line per search (none when omitted)."""

    def __init__(
        self,
        provider: Provider | Endpoint,
        settings: HostSettings | None = None,
        *,
        extract: ChatFn | None = None,
        retrieval_log: Path | None = None,
    ) -> None:
        self.provider = AlmanacProvider(provider) if isinstance(provider, Endpoint) else provider
        self.settings = settings or HostSettings()
        self.extract = extract
        self.log = RetrievalLog(retrieval_log) if retrieval_log is not None else None
        self._tasks: TaskGroup | None = None
        self._pending = 0
        self._saved = self._failed = self._lost = 0
        self._last_failure: str | None = None
        self._idle = anyio.Event()
        self._idle.set()

    async def __aenter__(self) -> MemoryProvider:
        if self.settings.enabled:  # off: nothing is started; nothing here will ever run
            self.provider.apply(self.settings)
            await self.provider.__aenter__()
            self._tasks = anyio.create_task_group()
            await self._tasks.__aenter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._tasks is None:
            return
        try:
            with anyio.move_on_after(self.settings.save_timeout):
                await self.drain()
            self._tasks.cancel_scope.cancel()  # saves still running past their bound are abandoned
            await self._tasks.__aexit__(None, None, None)
        finally:
            self._tasks = None
            await self.provider.__aexit__(None, None, None)

    async def state(self) -> ProviderState | None:
        """The provider's state by one real call (None while memory is off: nothing is called)."""
        if self._tasks is None:
            return None
        return await self.provider.state()

    async def before_turn(self, message: str) -> str:
        """The ``<memory>`` block for this turn (``""`` when there is nothing to add), searched with
        the message verbatim, unscoped. Never raises."""
        if not self.settings.loads or not message.strip():
            return ""
        return await self._load(message, None, MAIN_CONTEXT)

    async def load(self, query: str, *, scope: Scope | None = None, destination: str = MAIN_CONTEXT) -> str:
        """A deliberate load: the block for ``query``, limited to ``scope`` (that layer's memories
        and the user layer's) when given. Needs only the master switch, not ``autoLoad``."""
        if not self.settings.enabled or not query.strip():
            return ""
        return await self._load(query, scope, destination)

    async def remember(
        self, statement: str, *, scope: Scope | None = None, importance: float | None = None
    ) -> bool:
        """A deliberate save, pinned to ``scope`` when given, waited on (until ``save_timeout``).
        False when memory is off (nothing is called); raises ``AlmanacUnavailable`` or
        ``AlmanacRefused`` when it did not land."""
        if not self.settings.enabled:
            return False
        deadline = anyio.current_time() + self.settings.save_timeout
        await self.provider.save(statement, deadline=deadline, importance=importance, scope=scope)
        return True

    def after_turn(self, message: str, reply: str) -> None:
        """Start extracting and saving this turn's durable facts; returns at once, never raises."""
        if not self.settings.saves or self.extract is None:
            return
        tasks = self._require_tasks()
        self._pending += 1
        self._idle = anyio.Event() if self._pending == 1 else self._idle
        tasks.start_soon(self._save, message, reply)

    async def drain(self) -> None:
        """Wait until every save started so far has finished (or given up)."""
        await self._idle.wait()

    @property
    def status(self) -> SaveStatus:
        """Counts of saved facts and failed saves so far: a failed save is never silent."""
        return SaveStatus(self._saved, self._failed, self._lost, self._pending, self._last_failure)

    async def _load(self, query: str, scope: Scope | None, destination: str) -> str:
        self._require_tasks()
        s = self.settings
        request = Search(query, s.top_k, s.include_archived, s.max_tokens, scope)
        bound = min(s.load_timeout, OP_LIMIT_S)
        began = anyio.current_time()
        entry = Retrieval(self.provider.name, destination, scope, query)
        try:
            with anyio.fail_after(bound):
                found = await self.provider.search(request)
        except TimeoutError:
            self.provider.link.drop()
            log.warning("memory not loaded: %s did not answer within %.1f s", self.provider.label, bound)
            self._record(entry, began, outcome="timeout")
            return ""
        except Exception as exc:
            log.warning("memory not loaded: %s", exc)
            self._record(
                entry, began, outcome="refused" if isinstance(exc, AlmanacRefused) else "unavailable"
            )
            return ""
        block, kept = "", list[int]()
        if found.relevant:
            texts = [item.text for item in found.items]
            block, kept = assemble(texts, max_item_chars=s.max_item_chars, max_block_chars=s.max_block_chars)
        ids = tuple(found.items[p].id for p in kept)
        self._record(entry, began, mode=found.mode, loaded=found.considered, kept=ids, chars=len(block))
        return block

    def _record(self, entry: Retrieval, began: float, **fields: Any) -> None:
        if self.log is None:
            return
        latency_ms = (anyio.current_time() - began) * 1000
        try:
            self.log.write(replace(entry, latency_ms=latency_ms, **fields))
        except OSError as exc:
            log.warning("retrieval log not written: %s", exc)

    async def _save(self, message: str, reply: str) -> None:
        assert self.extract is not None
        bound = self.settings.save_timeout
        deadline = anyio.current_time() + bound
        facts: list[str] = []
        saved = 0
        try:
            with anyio.fail_after(bound):
                facts = parse_facts(await self.extract(extraction_messages(message, reply)))
            for fact in facts:
                await self.provider.save(fact, deadline=deadline, importance=AUTO_SAVE_IMPORTANCE)
                saved += 1
                self._saved += 1
            if facts:
                log.info("memory saved %d fact(s) from the turn", len(facts))
        except anyio.get_cancelled_exc_class():
            self._give_up("abandoned: the provider was closed while it ran", len(facts) - saved)
            raise
        except TimeoutError:
            self._give_up(f"the turn's extraction took over {bound:.1f} s", len(facts) - saved)
        except AlmanacUnavailable as exc:
            self._give_up(f"{exc} (save_timeout {bound:.1f} s)", len(facts) - saved)
        except Exception as exc:
            self._give_up(str(exc), len(facts) - saved)
        finally:
            self._pending -= 1
            if self._pending == 0:
                self._idle.set()

    def _give_up(self, why: str, lost: int) -> None:
        self._failed += 1
        self._lost += lost
        self._last_failure = why
        log.warning("memory not saved: %s (failed saves so far: %d)", why, self._failed)

    def _require_tasks(self) -> TaskGroup:
        if self._tasks is None:
            raise RuntimeError("use MemoryProvider as `async with MemoryProvider(...) as memory:`")
        return self._tasks
