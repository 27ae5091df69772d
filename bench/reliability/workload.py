"""A stream of mixed writes through the real MCP client, and a journal of what was acknowledged.

Each writer sends, one after another: notes (``remember``), facts and their supersedes (``remember``
with subject/predicate/object on the writer's own subjects), day-log entries (``remember_note``),
and retire/restore of memories it wrote before. Every write carries a unique marker.

A write the server answered is *acknowledged* and must be found later, exactly once. A write that
got no answer (the process died, the connection broke) is *unsure*: it may or may not have landed,
but never twice and never in part. Once a memory has an unsure write it is left alone, so every
memory has at most one unsure write, its last one; the expected state is then "the acknowledged
state, or that one write on top of it".
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
from mcp import Client
from mcp.types import CallToolResult

Connect = Callable[[], AbstractAsyncContextManager[Client]]

LIVE, RETIRED = "live", "retired"


@dataclass(frozen=True)
class Write:
    """One write a client sent."""

    client: str
    seq: int
    tool: str  # remember | remember_note | retire_memory | restore_memory
    kind: str  # fact | note | log
    memory: str | None  # known before the call for retire/restore and supersedes
    value: str  # a fact's object, a note's or log entry's text; "" for retire/restore
    subject: str | None = None


@dataclass(frozen=True)
class Acked:
    write: Write
    memory: str
    event_id: str | None
    action: str


@dataclass
class Memory:
    """What one memory should look like: its acknowledged writes, and at most one unsure one."""

    id: str
    kind: str
    acked: list[Acked] = field(default_factory=list)
    unsure: Write | None = None

    def values(self) -> set[str]:
        """The allowed current value (fact object, or note/log text)."""
        settled = [a.write.value for a in self.acked if a.write.tool in ("remember", "remember_note")]
        found = {settled[-1]} if settled else set()
        if self.unsure is not None and self.unsure.tool in ("remember", "remember_note"):
            found.add(self.unsure.value)
        return found

    def states(self) -> set[str]:
        """The allowed state (live or retired)."""
        state = LIVE
        for a in self.acked:
            if a.write.tool == "retire_memory":
                state = RETIRED
            elif a.write.tool == "restore_memory":
                state = LIVE
        found = {state}
        if self.unsure is not None and self.unsure.tool == "retire_memory":
            found.add(RETIRED)
        if self.unsure is not None and self.unsure.tool == "restore_memory":
            found.add(LIVE)
        return found


@dataclass
class Journal:
    """Everything the writers did, shared by all writers of one run."""

    memories: dict[str, Memory] = field(default_factory=dict)
    unsure_new: list[Write] = field(default_factory=list)  # creations with no answer (id unknown)
    calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    order: dict[str, list[str]] = field(default_factory=dict)  # client -> acknowledged markers in order

    @property
    def acked(self) -> int:
        return sum(len(m.acked) for m in self.memories.values())

    def ack(self, write: Write, receipt: dict[str, Any]) -> None:
        memory = self.memories.setdefault(receipt["id"], Memory(receipt["id"], write.kind))
        memory.acked.append(Acked(write, receipt["id"], receipt.get("event_id"), receipt["action"]))
        if write.value:
            self.order.setdefault(write.client, []).append(write.value)

    def unsure(self, write: Write) -> None:
        if write.memory is None:
            self.unsure_new.append(write)
        else:
            self.memories[write.memory].unsure = write


def error_kind(exc: BaseException) -> str:
    """A short, stable name for what went wrong (HTTP status when there is one)."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        return f"http {status}"
    error = getattr(exc, "error", None)
    if error is not None and getattr(error, "message", None):
        return f"{type(exc).__name__}: {str(error.message)[:60]}"
    inner = getattr(exc, "exceptions", None)
    if inner:
        return error_kind(inner[0])
    return type(exc).__name__


def receipt_of(result: CallToolResult) -> dict[str, Any]:
    if result.structured_content is None:
        raise ValueError("a write answered without a structured receipt")
    return dict(result.structured_content)


class Writer:
    """One client's stream of mixed writes (sequential: at most one write in flight)."""

    def __init__(self, name: str, journal: Journal, rng: random.Random) -> None:
        self.name = name
        self.journal = journal
        self.rng = rng
        self.seq = 0
        self.facts: dict[str, str] = {}  # subject -> fact id, for live facts with no unsure write

    def _candidates(self) -> list[Memory]:
        return [
            m
            for m in self.journal.memories.values()
            if m.unsure is None and m.acked and m.acked[0].write.client == self.name
        ]

    def next_write(self) -> Write:
        self.seq += 1
        marker = f"{self.name}-{self.seq}-{self.rng.getrandbits(32):08x}"
        roll = self.rng.random()
        mine = self._candidates()
        if roll < 0.2 and mine:
            target = self.rng.choice(mine)
            (state,) = target.states()
            tool = "retire_memory" if state == LIVE else "restore_memory"
            return Write(self.name, self.seq, tool, target.kind, target.id, "")
        live_facts = [s for s, fid in self.facts.items() if self._settled_live(fid)]
        if roll < 0.45 and live_facts:
            subject = self.rng.choice(live_facts)
            return Write(self.name, self.seq, "remember", "fact", self.facts[subject], marker, subject)
        if roll < 0.6:
            subject = f"{self.name} item {self.seq}"
            return Write(self.name, self.seq, "remember", "fact", None, marker, subject)
        if roll < 0.8:
            return Write(self.name, self.seq, "remember_note", "log", None, f"log {marker}")
        return Write(self.name, self.seq, "remember", "note", None, f"note {marker} about the fjord")

    def _settled_live(self, fact_id: str) -> bool:
        memory = self.journal.memories.get(fact_id)
        return memory is not None and memory.unsure is None and memory.states() == {LIVE}

    @staticmethod
    def arguments(write: Write) -> dict[str, Any]:
        if write.tool in ("retire_memory", "restore_memory"):
            return {"id": write.memory}
        if write.tool == "remember_note":
            return {"text": write.value}
        if write.kind == "fact":
            statement = f"{write.subject} is in state {write.value}"
            return {
                "statement": statement,
                "subject": write.subject,
                "predicate": "state",
                "object": write.value,
            }
        return {"statement": write.value}

    async def send(self, client: Client, write: Write) -> None:
        """Send one write and journal the outcome; raises what the transport raised (unsure)."""
        self.journal.calls += 1
        try:
            result = await client.call_tool(write.tool, self.arguments(write))
        except BaseException:
            self.journal.unsure(write)
            raise
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            self.journal.errors[f"refused: {text[:60]}"] += 1
            self.journal.unsure(write)
            return
        receipt = receipt_of(result)
        self.journal.ack(write, receipt)
        if write.kind == "fact" and write.subject is not None:
            self.facts[write.subject] = receipt["id"]

    async def run(
        self, connect: Connect, until: Callable[[], bool], *, max_writes: int | None = None
    ) -> None:
        """Write until ``until()`` says stop; reconnect after a broken call (errors are journalled)."""
        written = 0
        while not until() and (max_writes is None or written < max_writes):
            try:
                async with connect() as client:
                    while not until() and (max_writes is None or written < max_writes):
                        written += 1
                        await self.send(client, self.next_write())
            except Exception as exc:  # the call's outcome is unknown: journalled as unsure
                self.journal.errors[error_kind(exc)] += 1
                await anyio.sleep(0.05)


async def run_writers(
    writers: list[Writer],
    connect: Callable[[str], Connect],
    until: Callable[[], bool],
    *,
    max_writes: int | None = None,
    during: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Run the writers at once; ``during`` runs beside them (it may kill things)."""
    async with anyio.create_task_group() as tg:
        for w in writers:
            tg.start_soon(partial(w.run, connect(w.name), until, max_writes=max_writes))
        if during is not None:
            await during()
