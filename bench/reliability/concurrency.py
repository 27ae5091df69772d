"""``rel:concurrency``: many clients writing to one workspace through the gateway at once.

- ``many_writers``: every client runs its own stream of mixed writes; afterwards every
  acknowledged write is there exactly once (tools and disk), and each client's writes are in
  the ledger and the day logs in the order the client made them;
- ``supersede_race``: every client supersedes the *same* subject + predicate; the fact's history
  stays one line (each value closes exactly the one before it, one current value, no value twice),
  through ``retrieve_memory(include_history=True)`` and in the ledger's ``closes`` chain.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import anyio

from bench.reliability import disk
from bench.reliability.check import check_disk, check_tools
from bench.reliability.kill import Outcome
from bench.reliability.procs import GatewayRun
from bench.reliability.workload import Journal, Write, Writer, receipt_of, run_writers

SETTINGS = {"engine_max_connections": "200"}


def check_order(root: Path, journal: Journal) -> list[str]:
    """Each client's acknowledged writes are in its order: fact events in the (append-only) ledger,
    and the time-ordered ids (ULIDs) the engine gave its new notes and log entries."""
    position = {event_id: i for i, event_id in enumerate(disk.scan(root).events)}
    problems: list[str] = []
    by_client: dict[str, list[tuple[int, str, str | None]]] = {}
    for memory in journal.memories.values():
        for acked in memory.acked:
            by_client.setdefault(acked.write.client, []).append((acked.write.seq, memory.id, acked.event_id))
    for client, writes in by_client.items():
        writes.sort()
        ledger = [
            position[e] for _, m, e in writes if m.startswith("fct_") and e is not None and e in position
        ]
        if ledger != sorted(ledger):
            problems.append(f"{client}'s facts are out of order in the ledger")
        created = [
            m.split("_", 1)[1] for _, m, e in writes if m.startswith(("nte_", "log_")) and e is not None
        ]
        created = list(dict.fromkeys(created))
        if created != sorted(created):
            problems.append(f"{client}'s notes and log entries were given out-of-order ids")
    return problems


async def many_writers(root: Path, clients: int, writes: int, rng: random.Random) -> Outcome:
    out = Outcome(f"{clients} clients × {writes} mixed writes, one workspace")
    gw = GatewayRun(root, dict(SETTINGS))
    (token,) = gw.seed(1, "many")
    gw.start()
    try:
        ws = [Writer(f"c{i}", out.journal, random.Random(rng.getrandbits(64))) for i in range(clients)]
        await run_writers(ws, lambda _name: lambda: gw.connect(token), lambda: False, max_writes=writes)
        out.trials = 1
        async with gw.connect(token) as client:
            out.problems += await check_tools(client, out.journal)
        out.problems += check_disk(gw.workspace(token), out.journal)
        out.problems += check_order(gw.workspace(token), out.journal)
        if out.journal.errors:
            out.problems += [f"{n} × {kind}" for kind, n in out.journal.errors.items()]
    finally:
        if gw.stop() != 0:
            out.problems.append("the gateway did not exit 0 on SIGTERM")
    return out


async def supersede_race(root: Path, clients: int, steps: int, rng: random.Random) -> Outcome:
    out = Outcome(f"supersede race: {clients} clients × {steps} values of one fact")
    gw = GatewayRun(root, dict(SETTINGS))
    (token,) = gw.seed(1, "race")
    gw.start()
    acked: list[dict[str, Any]] = []
    try:

        async def racer(name: str) -> None:
            async with gw.connect(token) as client:
                for step in range(steps):
                    value = f"{name}-{step}-{rng.getrandbits(32):08x}"
                    out.journal.calls += 1
                    args = {"statement": f"the race is at {value}", "subject": "Race", "predicate": "leader"}
                    result = await client.call_tool("remember", {**args, "object": value})
                    if result.is_error:
                        out.journal.errors[str(result.content)[:60]] += 1
                    else:
                        acked.append({**receipt_of(result), "object": value})
                        write = Write(name, step, "remember", "fact", None, value, "Race")
                        out.journal.ack(write, receipt_of(result))

        async with anyio.create_task_group() as tg:
            for i in range(clients):
                tg.start_soon(racer, f"r{i}")
        out.trials = 1
        async with gw.connect(token) as client:
            result = await client.call_tool(
                "retrieve_memory", {"subject": "Race", "predicate": "leader", "include_history": True}
            )
            history = list(receipt_of(result)["facts"])
        out.problems += race_problems(acked, history, gw.workspace(token))
        out.problems += [f"{n} × {kind}" for kind, n in out.journal.errors.items()]
    finally:
        if gw.stop() != 0:
            out.problems.append("the gateway did not exit 0 on SIGTERM")
    return out


def race_problems(acked: list[dict[str, Any]], history: list[dict[str, Any]], root: Path) -> list[str]:
    problems: list[str] = []
    ids = {a["id"] for a in acked}
    if len(ids) != 1:
        problems.append(f"one subject + predicate became {len(ids)} facts")
    events = [h["event_id"] for h in history]
    if sorted(events) != sorted(a["event_id"] for a in acked):
        problems.append(
            f"{len(acked)} acknowledged values, {len(history)} in the history (or different ones)"
        )
    if len(set(events)) != len(events):
        problems.append("a value appears twice in the history")
    current = [h for h in history if h["current"]]
    ordered = sorted(history, key=lambda h: (h["valid_from"], h["event_id"]))
    if len(current) != 1 or not ordered or current[0]["event_id"] != ordered[-1]["event_id"]:
        problems.append("the current value is not the last one")
    for before, after in itertools.pairwise(ordered):
        if before["valid_to"] != after["valid_from"]:
            ends, starts = before["valid_to"], after["valid_from"]
            problems.append(f"history not linear: {before['event_id']} ends {ends}, the next starts {starts}")
    chain = [e for found in disk.scan(root).events.values() for e in found if e.fields.get("memory") in ids]
    closed = [e.fields.get("closes") for e in chain if e.kind == "supersede"]
    if len(closed) != len(set(closed)):
        problems.append("two supersedes in the ledger close the same value (the history forked)")
    for prior, event in itertools.pairwise(chain):
        closes = event.fields.get("closes")
        if event.kind == "supersede" and closes != prior.id:
            problems.append(f"ledger: {event.id} closes {closes}, not the value before it ({prior.id})")
    return problems
