"""Check a journal against a workspace: on disk (the Markdown store) and through the tools.

Each returns a list of problems (empty: every acknowledged write is there exactly once, in the
state its last acknowledged write left it, and nothing is duplicated or half-written).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from mcp import Client

from bench.reliability import disk
from bench.reliability.workload import LIVE, RETIRED, Journal, Memory


def _unfinished_move(root: Path, paths: list[Path]) -> bool:
    """A log entry in the live and the retired day file of the same day: a retire or restore that a
    crash interrupted between its two file writes — the documented state (docs/store-format.md,
    "Moving a log entry") that the engine repairs when it next loads the workspace."""
    found = sorted(str(p.relative_to(root)) for p in paths)
    return len(found) == 2 and found[1] == f"retired/{found[0]}" and found[0].startswith("logs/")


def check_disk(root: Path, journal: Journal, *, after_crash: bool = False) -> list[str]:
    """``after_crash``: the engine was killed and has not loaded the workspace since, so a log
    entry left in both day files by an interrupted move is expected (not yet repaired)."""
    store = disk.scan(root)
    problems: list[str] = []
    for event_id, found in store.events.items():
        if len(found) > 1:
            problems.append(f"ledger event {event_id} appears {len(found)} times")
    for memory_id, paths in [*store.notes.items(), *store.logs.items()]:
        if after_crash and memory_id in store.logs and _unfinished_move(root, paths):
            continue
        if len(paths) > 1:
            problems.append(
                f"{memory_id} is in {len(paths)} files: {[str(p.relative_to(root)) for p in paths]}"
            )
    for memory in journal.memories.values():
        problems += _memory_on_disk(root, store, memory, after_crash=after_crash)
    for write in journal.unsure_new:
        if write.kind == "note":
            holders = [p for p, text in store.note_text.items() if write.value in text]
            if len(holders) > 1 or any(store.note_text[p].strip() != write.value for p in holders):
                problems.append(f"an unanswered note {write.value!r} is duplicated or partial on disk")
        elif write.kind == "log":
            logged = [i for i, text in store.log_text.items() if write.value in text]
            if len(logged) > 1 or any(store.log_text[i] != write.value for i in logged):
                problems.append(f"an unanswered log entry {write.value!r} is duplicated or partial on disk")
    return problems


def _memory_on_disk(root: Path, store: disk.Store, memory: Memory, *, after_crash: bool) -> list[str]:
    problems: list[str] = []
    for acked in memory.acked:
        if acked.event_id is None or (memory.kind != "fact" and acked.action == "store"):
            continue  # nochange: nothing written; a new note or log entry is its own file or line
        events = store.events.get(acked.event_id, [])
        if len(events) != 1:
            problems.append(
                f"acknowledged {acked.action} {acked.event_id} ({memory.id}) is on disk {len(events)} times"
            )
            continue
        (event,) = events
        if event.kind != acked.action or event.fields.get("memory") != memory.id:
            problems.append(f"ledger event {acked.event_id} is {event.kind} of {event.fields.get('memory')}")
        if (
            memory.kind == "fact"
            and acked.write.tool == "remember"
            and event.fields.get("object") != acked.write.value
        ):
            problems.append(f"ledger event {acked.event_id} has object {event.fields.get('object')!r}")
    states, values = memory.states(), memory.values()
    if memory.kind in ("note", "log"):
        paths = (store.notes if memory.kind == "note" else store.logs).get(memory.id, [])
        if after_crash and memory.kind == "log" and _unfinished_move(root, paths):
            # which copy counts is settled when the engine next loads (checked after the restart)
            if store.log_text[memory.id] not in values:
                problems.append(f"{memory.id} reads {store.log_text[memory.id][:60]!r} on disk")
            return problems
        if len(paths) != 1:
            problems.append(f"acknowledged {memory.kind} {memory.id} is in {len(paths)} files")
            return problems
        state = RETIRED if disk.is_retired(root, paths[0]) else LIVE
        if state not in states:
            problems.append(f"{memory.id} is {state} on disk; expected {sorted(states)}")
        text = store.note_text[paths[0]].strip() if memory.kind == "note" else store.log_text[memory.id]
        if text not in values:
            problems.append(f"{memory.id} reads {text[:60]!r} on disk; expected {sorted(values)}")
    return problems


async def check_tools(client: Client, journal: Journal) -> list[str]:
    problems: list[str] = []
    for memory in journal.memories.values():
        args: dict[str, Any] = {"id": memory.id, "include_history": memory.kind == "fact"}
        result = await client.call_tool("retrieve_memory", args)
        if result.is_error or result.structured_content is None:
            problems.append(f"retrieve_memory({memory.id}) failed: {result.content}")
            continue
        found = dict(result.structured_content)
        problems += _fact_through_tools(memory, found["facts"]) if memory.kind == "fact" else []
        if memory.kind != "fact":
            items = [n for n in found["notes"] if n["id"] == memory.id]
            if len(items) != 1:
                problems.append(f"{memory.id} comes back {len(items)} times")
                continue
            text = items[0]["text"].strip()
            if text not in memory.values():
                problems.append(f"{memory.id} reads {text[:60]!r}; expected {sorted(memory.values())}")
            if items[0]["state"] not in memory.states():
                problems.append(f"{memory.id} is {items[0]['state']}; expected {sorted(memory.states())}")
    return problems


def _fact_through_tools(memory: Memory, values: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    events = [v["event_id"] for v in values]
    if len(events) != len(set(events)):
        problems.append(f"{memory.id} has a value twice in its history")
    for acked in memory.acked:
        if acked.write.tool == "remember" and acked.event_id not in events:
            problems.append(f"acknowledged {acked.action} {acked.event_id} of {memory.id} is missing")
    current = [v for v in values if v["current"]]
    if len(current) != 1:
        return [*problems, f"{memory.id} has {len(current)} current values"]
    if current[0]["object"] not in memory.values():
        problems.append(f"{memory.id} is {current[0]['object']!r}; expected {sorted(memory.values())}")
    if current[0]["state"] not in memory.states():
        problems.append(f"{memory.id} is {current[0]['state']}; expected {sorted(memory.states())}")
    ordered = sorted(values, key=lambda v: v["valid_from"])
    for before, after in itertools.pairwise(ordered):
        if before["valid_to"] != after["valid_from"]:
            problems.append(
                f"{memory.id} history is not linear at {before['event_id']} → {after['event_id']}"
            )
    return problems
