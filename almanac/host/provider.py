"""The turn loop: load before a turn, save after it; Almanac's failures never break a turn.

::

    async with MemoryProvider(Endpoint.service(url, token), HostSettings(enabled=True),
                              extract=openai_chat(base_url, "small-model")) as memory:
        block = await memory.before_turn(message)      # "" when off, unreachable or nothing relevant
        reply = await model(system_prompt + block, message)
        memory.after_turn(message, reply)             # returns at once; saves in the background
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from almanac.host.block import memory_block
from almanac.host.connection import AlmanacUnavailable, Endpoint, Link
from almanac.host.extract import extraction_messages, parse_facts
from almanac.host.openai import ChatFn
from almanac.host.settings import HostSettings

log = logging.getLogger("almanac.host")

AUTO_SAVE_IMPORTANCE = 0.5


@dataclass(frozen=True)
class SaveStatus:
    """How the background saves went since the provider was entered (``MemoryProvider.status``)."""

    saved: int = 0
    """Facts stored in Almanac."""
    failed: int = 0
    """Turns whose save finally failed: the extraction failed, or a fact was refused, or did not
    land within ``save_timeout`` (each is also logged once, with this count)."""
    lost: int = 0
    """Facts the extraction produced that are not in Almanac (refused or never landed)."""
    pending: int = 0
    """Turns still being extracted or saved."""
    last_failure: str | None = None
    """Why the last failed save failed."""


class MemoryProvider:
    """Almanac as an agent host's memory. Use it as an async context manager."""

    def __init__(
        self,
        endpoint: Endpoint,
        settings: HostSettings | None = None,
        *,
        extract: ChatFn | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.settings = settings or HostSettings()
        self.extract = extract
        self._tasks: TaskGroup | None = None
        self._link: Link | None = None
        self._pending = 0
        self._saved = self._failed = self._lost = 0
        self._last_failure: str | None = None
        self._idle = anyio.Event()
        self._idle.set()

    async def __aenter__(self) -> MemoryProvider:
        if self.settings.enabled:  # off: not even a task group; nothing here will ever run
            self._tasks = anyio.create_task_group()
            await self._tasks.__aenter__()
            self._link = Link(self.endpoint, self._tasks)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._tasks is None:
            return
        with anyio.move_on_after(self.settings.save_timeout):
            await self.drain()
        self._tasks.cancel_scope.cancel()  # saves still running past their bound are abandoned
        assert self._link is not None
        self._link.drop()
        await self._tasks.__aexit__(None, None, None)
        self._tasks = self._link = None

    async def before_turn(self, message: str) -> str:
        """The ``<memory>`` block for this turn (``""`` when there is nothing to add). Never raises."""
        if not self.settings.loads or not message.strip():
            return ""
        link = self._require()
        try:
            with anyio.fail_after(self.settings.load_timeout):
                context = await link.call(
                    "get_context", {"query": message, "max_tokens": self.settings.max_tokens}
                )
        except TimeoutError:
            link.drop()
            log.warning("memory not loaded: Almanac did not answer within %.1f s", self.settings.load_timeout)
            return ""
        except Exception as exc:
            log.warning("memory not loaded: %s", exc)
            return ""
        return memory_block(
            context,
            max_item_chars=self.settings.max_item_chars,
            max_block_chars=self.settings.max_block_chars,
        )

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
                arguments = {"statement": fact, "importance": AUTO_SAVE_IMPORTANCE}
                await self._require().call_until("remember", arguments, deadline)
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

    def _require(self) -> Link:
        if self._link is None:
            raise RuntimeError("use MemoryProvider as `async with MemoryProvider(...) as memory:`")
        return self._link

    def _require_tasks(self) -> TaskGroup:
        if self._tasks is None:
            raise RuntimeError("use MemoryProvider as `async with MemoryProvider(...) as memory:`")
        return self._tasks
