"""``rel:fuzz``: hostile arguments to every tool, through the real ``mcp`` client, against a real
engine process. Every reply is a result or a clean refusal (a stable ``[code]``, never an internal
error), comes within a bound, and a refusal writes nothing.

The arguments come from each tool's own input schema (so a new tool is fuzzed too): values of the
right type with hostile content (sizes at and past the limits, Unicode, control characters, FTS5
syntax, path traversal, budgets at the edges), values of the wrong type, missing and unknown keys,
from four identities (local, named, read-only, pinned to a scope). Lone surrogates are left out:
the client itself cannot encode them. ``make test`` runs a short version;
``ALMANAC_FUZZ_EXAMPLES=2000`` a long one
(see docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from tests.engine.support import snapshot, socket_client, socket_engine

EXAMPLES = int(os.environ.get("ALMANAC_FUZZ_EXAMPLES", "25"))  # per tool
REPLY_BOUND_S = 20.0
#: Refusal codes a hostile argument may earn. Anything else (or no code) is a defect.
CLEAN = {
    "invalid_argument",
    "invalid_input",
    "too_long",
    "bad_scope",
    "bad_date",
    "not_found",
    "forbidden",
    "read_only",
    "unknown_tool",
}
_CODE = re.compile(r"\[([a-z_]+)\]\s*$")

NASTY = [
    "",
    " ",
    "\n\n",
    "x" * 4000,
    "x" * 4001,
    "ü" * 5000,
    "🦓" * 1500,
    "w " * 60_000,
    'AND OR NOT NEAR(a b) "unbalanced * ^ col:umn -hyphen (paren',
    '"""',
    "NEAR/3",
    "*",
    "\x00",
    "a\x01b\x1bc\x7f",
    "tab\there\r\nline",
    "\u202eright-to-left",
    "\ufeffbom",
    "../../etc/passwd",
    "/etc/passwd",
    "nte_../../x",
    "log_00000000000000000000000000",
    "fct_0000000000000000000a",
    "project:fjord",
    "Project:Fjord",
    "a" * 65,
    "2026-02-30",
    "2026-11-30",
    "2026-11-30T14:00:00+14:00",
    "9999-12-31",
    "0001-01-01",
    "-1",
    "Robert'); DROP TABLE chunks;--",
    "<script>alert(1)</script>",
    "%00%2e%2e%2f",
]
NUMBERS = [0, 1, -1, 99, 100, 101, 800, 3999, 4000, 4001, 2**31, 2**63, -(2**63), 0.5, 1.0, 1e308, -0.0]
WEIRD = [None, True, False, [], {}, ["a"], {"a": 1}, [None], [1, 2], float("inf"), float("nan")]


def hostile_string() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(NASTY),
        st.text(max_size=80),
        st.text(st.characters(codec="utf-8", categories=["Cc", "Cf", "Zs", "Zl", "Zp", "So"]), max_size=40),
        st.sampled_from(NASTY).map(lambda s: s * 3),
    )


KNOWN = "<an id the engine gave out>"  # replaced at call time (strategies must not read state)


def value_for(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value for one schema property: usually its own type with hostile content, sometimes not."""
    types = {t.get("type") for t in spec.get("anyOf", [spec])}
    right: list[st.SearchStrategy[Any]] = []
    if "string" in types:
        right.append(hostile_string() | st.just(KNOWN))
    if "integer" in types:
        right.append(st.sampled_from(NUMBERS).filter(lambda n: isinstance(n, int)) | st.integers())
    if "number" in types:
        right.append(st.sampled_from(NUMBERS) | st.floats(allow_nan=False))
    if "boolean" in types:
        right.append(st.booleans())
    if "array" in types:
        right.append(st.lists(hostile_string(), max_size=25))
    if "null" in types:
        right.append(st.none())
    wrong = st.sampled_from(WEIRD) | st.sampled_from(NUMBERS) | hostile_string()
    return st.one_of(*right, wrong) if right else wrong


@st.composite
def arguments(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties", {})
    args: dict[str, Any] = {}
    for name, spec in props.items():
        if draw(st.integers(0, 9)) < 7:  # most keys present; required ones sometimes missing
            args[name] = draw(value_for(spec))
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.sampled_from(["ctx", "__proto__", "Statement", "extra", ""]))] = draw(hostile_string())
    return args


IDENTITIES = {
    "local": {},
    "named": {"X-Almanac-Connection": "fuzz%20bot"},
    "read-only": {"X-Almanac-Connection": "viewer", "X-Almanac-Read-Only": "1"},
    "pinned": {"X-Almanac-Connection": "pinned", "X-Almanac-Scope": "project:fjord"},
}


class Session:
    """One real engine and a real client per identity, kept open across examples (a blocking portal
    runs the clients' event loop in a thread)."""

    def __init__(self, portal: BlockingPortal, ws: Path, clients: dict[str, Client]) -> None:
        self.portal, self.ws, self.clients = portal, ws, clients
        self.known_ids: list[str] = []
        self.calls = self.refusals = 0
        self.schemas: dict[str, dict[str, Any]] = {}

    def call(self, who: str, tool: str, args: dict[str, Any]) -> Any:
        async def go() -> Any:
            with anyio.fail_after(REPLY_BOUND_S):
                return await self.clients[who].call_tool(tool, args)

        self.calls += 1
        return self.portal.call(go)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    folder = tmp_path_factory.mktemp("fuzz")
    ws, sock = folder / "ws", folder / "e.sock"
    with (
        socket_engine(ws, sock, "--embedding-provider", "off"),
        start_blocking_portal() as portal,
        contextlib.ExitStack() as stack,
    ):
        clients = {
            who: stack.enter_context(portal.wrap_async_context_manager(socket_client(sock, headers)))
            for who, headers in IDENTITIES.items()
        }
        s = Session(portal, ws, clients)

        async def schemas() -> dict[str, dict[str, Any]]:
            listed = await clients["local"].list_tools()
            return {t.name: t.input_schema for t in listed.tools}

        s.schemas = portal.call(schemas)
        yield s


TOOLS = [
    "remember",
    "save_memory",
    "remember_note",
    "retrieve_memory",
    "retire_memory",
    "restore_memory",
    "get_context",
    "memory_status",
]


def test_every_tool_is_fuzzed(session: Session) -> None:
    assert set(session.schemas) == set(TOOLS), "a tool was added or renamed: list it in TOOLS"


@pytest.mark.req("rel:fuzz")
@pytest.mark.parametrize("tool", TOOLS)
def test_hostile_arguments_get_clean_answers_in_bounded_time_and_refusals_write_nothing(
    session: Session, tool: str
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(st.sampled_from(list(IDENTITIES)), st.data())
    def one(who: str, data: st.DataObject) -> None:
        args = data.draw(arguments(session.schemas[tool]))
        latest = session.known_ids[-1] if session.known_ids else "nte_01M8N16DE4023GQ7VE9X9A8VJT"
        args = {k: latest if v == KNOWN else v for k, v in args.items()}
        before = snapshot(session.ws)
        started = time.monotonic()
        result = session.call(who, tool, args)
        assert time.monotonic() - started < REPLY_BOUND_S
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            code = _CODE.search(text)
            assert code is not None and code.group(1) in CLEAN, f"{tool}({args!r}) → {text!r}"
            assert snapshot(session.ws) == before, f"{tool}({args!r}) was refused but wrote something"
            session.refusals += 1
        else:
            reply = result.structured_content or {}
            if isinstance(reply.get("id"), str):
                session.known_ids.append(reply["id"])

    one()


@pytest.mark.req("rel:fuzz")
def test_after_the_fuzzing_the_store_reads_back_whole(session: Session) -> None:
    """Everything the fuzzed engine wrote is readable: no file it wrote is reported as damaged."""
    status = session.call("local", "memory_status", {}).structured_content
    assert status["unreadable_files"] == 0, status["problems"]
    assert session.calls > 0
    print(f"\nrel:fuzz: {session.calls} calls, {session.refusals} clean refusals, 0 internal errors")
