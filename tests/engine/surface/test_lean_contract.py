"""The lean path answers exactly as the SDK's entry does (engine:surface, perf:gateway).

Two real engine processes over copies of one workspace: one as it runs in production (plain
requests answered by ``engine.surface.lean``), one with ``--sdk-replies`` (every request through the
SDK's HTTP entry, as before the lean path). The same request bytes go to both, one after the other,
and the replies must match: status, headers (all but ``date``), body. The only things masked are what
two processes cannot share: the ids and times a write mints, and the index's size on disk in
``memory_status`` (when SQLite checkpoints its log differs from process to process).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from engine.server import SOCKET_SECURITY
from engine.surface.lean import Lean, Plain
from engine.surface.replies import NOT_JSON
from engine.tools import Served, build_server
from tests.engine.support import socket_engine

PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "contract", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# What a write mints: ids (a prefix and a ULID) and times; the same in length on both sides.
_MINTED = re.compile(
    rb"\b[a-z]{2,4}_[0-9A-HJKMNP-TV-Z]{26}\b"
    rb"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"
)


def message(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    sent: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        sent["params"] = {**params, "_meta": META}
    return sent


def call(tool: str, arguments: Any, request_id: Any = 1) -> dict[str, Any]:
    return message("tools/call", {"name": tool, "arguments": arguments}, request_id)


def headers_for(sent: Any, **extra: str) -> dict[str, str]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL,
    }
    if isinstance(sent, dict) and isinstance(sent.get("method"), str):
        headers["mcp-method"] = sent["method"]
        name = (sent.get("params") or {}).get("name")
        if isinstance(name, str):
            headers["mcp-name"] = name
    headers.update({k.replace("_", "-"): v for k, v in extra.items()})
    return {k: v for k, v in headers.items() if v != ""}


def body_of(sent: Any) -> bytes:
    return sent if isinstance(sent, bytes) else json.dumps(sent, separators=(",", ":")).encode()


# Requests answered -32602 (invalid params), and what the message must say.
INVALID_PARAMS: list[tuple[str, Any, dict[str, str], str]] = [
    (
        "an unknown prompt",
        message("prompts/get", {"name": "nope"}),
        {},
        "no prompt named 'nope': Almanac serves no prompts, only tools",
    ),
    (
        "an unknown resource",
        message("resources/read", {"uri": "file:///etc/x"}),
        {"mcp_name": "file:///etc/x"},
        "no resource at 'file:///etc/x': Almanac serves no resources, only tools",
    ),
    (
        "a prompt without a name",
        message("prompts/get", {}),
        {},
        "invalid params for prompts/get: name is required",
    ),
    (
        "a call without a name",
        message("tools/call", {"arguments": {}}),
        {},
        "invalid params for tools/call: name is required",
    ),
    (
        "a cursor that is not a string",
        message("tools/list", {"cursor": 5}),
        {},
        "invalid params for tools/list: cursor must be a string, not a number",
    ),
]

# (what it checks, the body, header changes: a value of "" removes the header)
PLAIN: list[tuple[str, Any, dict[str, str]]] = [
    ("remember", call("remember", {"statement": "The kelp release ships Friday", "tags": ["kelp"]}), {}),
    ("remember, already known", call("remember", {"statement": "Ada owns the fjord deploy"}), {}),
    ("save_memory", call("save_memory", {"subject": "fjord", "predicate": "colour", "object": "teal"}), {}),
    ("remember_note", call("remember_note", {"text": "standup: nothing blocked", "date": "2026-03-14"}), {}),
    ("retrieve_memory", call("retrieve_memory", {"subject": "fjord"}, "req-7"), {}),
    ("get_context", call("get_context", {"query": "who owns the fjord deploy?"}), {}),
    ("get_context, no query", call("get_context", {}), {}),
    ("memory_status", call("memory_status", {}), {}),
    ("tools/list", message("tools/list", {}), {}),
    ("tools/list, read-only connection", message("tools/list", {}), {"x_almanac_read_only": "1"}),
    ("ping", message("ping", {}), {}),
    ("a write on a read-only connection", call("remember", {"statement": "x"}), {"x_almanac_read_only": "1"}),
    ("a tool error", call("retire_memory", {"id": "nte_01M8N16DE4023GQ7VE9X9A8VJT"}), {}),
    ("an unknown tool", call("forget_everything", {}), {}),
    ("an unknown tool, read-only connection", call("forget_everything", {}), {"x_almanac_read_only": "1"}),
    ("bad arguments", call("remember", {"statement": 5, "importance": "high"}), {}),
    ("a missing argument", call("save_memory", {"subject": "fjord"}), {}),
    ("arguments not an object", call("remember", ["x"]), {}),
    # every argument of every tool, and what the SDK's own argument model does with them
    (
        "remember, every argument, non-ASCII",
        call(
            "remember",
            {
                "statement": 'Zoë\'s café — naïve 日本 \u2028 "quoted"',
                "subject": "café",
                "predicate": "owner",
                "object": "Zoë",
                "scope": "project:fjord",
                "tags": ["kelp", "ü"],
                "importance": 0.95,
                "source": "nightly-agent",
            },
        ),
        {"x_almanac_connection": "contract%20agent", "x_almanac_connection_id": "conn-1"},
    ),
    (
        "remember, tags as a JSON string (pre-parsed)",
        call(
            "remember",
            {
                "statement": "the kelp pipeline is frozen",
                "tags": '["infra", "kelp"]',
            },
        ),
        {},
    ),
    (
        "remember, importance as a string number",
        call(
            "remember",
            {
                "statement": "the tide table is cached",
                "importance": "0.5",
            },
        ),
        {},
    ),
    ("remember, arguments null", call("remember", None), {}),
    ("remember, no arguments at all", message("tools/call", {"name": "remember"}), {}),
    ("remember, an unknown argument", call("remember", {"statement": "x", "colour": "teal"}), {}),
    ("remember, too long", call("remember", {"statement": "x" * 4001}), {}),
    ("remember, tags not a list", call("remember", {"statement": "x", "tags": 7}), {}),
    ("remember, importance out of range", call("remember", {"statement": "x", "importance": 3}), {}),
    ("remember, a bad scope", call("remember", {"statement": "x", "scope": "Not A Scope"}), {}),
    (
        "remember, pinned scope",
        call("remember", {"statement": "pinned words"}),
        {"x_almanac_scope": "team:a"},
    ),
    (
        "save_memory, supersedes",
        call(
            "save_memory",
            {
                "subject": "fjord",
                "predicate": "region",
                "object": "us-east",
                "statement": "moved",
                "source": "ops",
            },
        ),
        {},
    ),
    (
        "save_memory, same value again",
        call(
            "save_memory",
            {
                "subject": "fjord",
                "predicate": "region",
                "object": "us-east",
            },
        ),
        {},
    ),
    ("remember_note, bad date", call("remember_note", {"text": "x", "date": "14 March"}), {}),
    ("remember_note, today", call("remember_note", {"text": "deploy window opens at 9"}), {}),
    ("retrieve_memory, history", call("retrieve_memory", {"subject": "fjord", "include_history": True}), {}),
    ("retrieve_memory, predicate", call("retrieve_memory", {"predicate": "region", "scope": None}), {}),
    ("retrieve_memory, as_of", call("retrieve_memory", {"subject": "fjord", "as_of": "2020-01-01"}), {}),
    ("retrieve_memory, bad as_of", call("retrieve_memory", {"subject": "fjord", "as_of": "yesterday"}), {}),
    ("retrieve_memory, unknown id", call("retrieve_memory", {"id": "nte_01M8N16DE4023GQ7VE9X9A8VJT"}), {}),
    ("retire_memory, bad id", call("retire_memory", {"id": "banana"}), {}),
    ("restore_memory, unknown id", call("restore_memory", {"id": "fct_01M8N16DE4023GQ7VE9X9A8VJT"}), {}),
    (
        "get_context, every argument",
        call(
            "get_context",
            {
                "query": "fjord région?",
                "scope": "project:fjord",
                "max_tokens": 300,
                "include_archived": True,
            },
        ),
        {},
    ),
    ("get_context, budget too small", call("get_context", {"query": "fjord", "max_tokens": 5}), {}),
    ("get_context, max_tokens a string", call("get_context", {"max_tokens": "lots"}), {}),
    ("get_context, pinned scope", call("get_context", {"query": "fjord"}), {"x_almanac_scope": "team:a"}),
    ("memory_status, an argument it does not take", call("memory_status", {"verbose": True}), {}),
    ("a string id", call("get_context", {"query": "kelp"}, "abc-\u00e9"), {}),
    ("a large id", call("get_context", {"query": "kelp"}, 2**53 + 1), {}),
    (
        "a trace context in _meta",
        {
            **call("get_context", {}),
            "params": {
                "name": "get_context",
                "arguments": {},
                "_meta": {**META, "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"},
            },
        },
        {},
    ),
    (
        "params beyond name and arguments",
        {
            **call("get_context", {}),
            "params": {
                "name": "get_context",
                "arguments": {},
                "requestState": None,
                "_meta": META,
            },
        },
        {},
    ),
    (
        "no client info in the envelope",
        {
            **call("get_context", {}),
            "params": {
                "name": "get_context",
                "arguments": {},
                "_meta": {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientInfo"},
            },
        },
        {},
    ),
    (
        "client info of the wrong shape",
        {
            **call("get_context", {}),
            "params": {
                "name": "get_context",
                "arguments": {},
                "_meta": {
                    **META,
                    "io.modelcontextprotocol/clientInfo": {"name": 5},
                },
            },
        },
        {},
    ),
    ("an unknown method", message("resources/list", {}), {}),
    ("prompts are not served", message("prompts/list", {}), {}),
    ("server/discover: the capabilities", message("server/discover", {}), {}),
    *[(f"invalid params: {what}", sent, extra) for what, sent, extra, _ in INVALID_PARAMS],
    ("no such method at all", message("almanac/nothing", {}), {}),
    ("a loopback Origin", call("memory_status", {}), {"origin": "http://localhost:5173"}),
    ("Host with a port", call("memory_status", {}), {"host": "127.0.0.1:8080"}),
]
ODD: list[tuple[str, Any, dict[str, str]]] = [
    ("malformed JSON", b'{"jsonrpc": "2.0", "id": 1, "method": ', {"mcp_method": "tools/call"}),
    ("a batch", [call("memory_status", {})], {"mcp_method": "tools/call"}),
    ("a notification", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}, {}),
    ("wrong Accept", call("memory_status", {}), {"accept": "text/html"}),
    ("SSE-only Accept", call("memory_status", {}), {"accept": "text/event-stream"}),
    ("no Accept", call("memory_status", {}), {"accept": ""}),
    ("wrong Content-Type", call("memory_status", {}), {"content_type": "text/plain"}),
    ("a foreign Host", call("memory_status", {}), {"host": "evil.example"}),
    ("a foreign Origin", call("memory_status", {}), {"origin": "https://evil.example"}),
    ("Mcp-Name disagrees", call("memory_status", {}), {"mcp_name": "remember"}),
    ("Mcp-Method disagrees", call("memory_status", {}), {"mcp_method": "tools/list"}),
    ("no envelope", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, {}),
    ("an unknown version", call("memory_status", {}), {"mcp_protocol_version": "2099-01-01"}),
    ("an Mcp-Param header", call("memory_status", {}), {"mcp_param_scope": "work"}),
    ("a float id", call("memory_status", {}, 1.0), {}),
    ("a null id", call("memory_status", {}, None), {}),
    ("no jsonrpc version", {**call("memory_status", {}), "jsonrpc": "1.0"}, {}),
]


@contextlib.contextmanager
def engines(tmp_path: Path) -> Iterator[tuple[httpx.Client, httpx.Client, list[str]]]:
    """Lean and SDK-only engines over copies of one seeded workspace, and the seeded memories' ids."""
    seed, seed_sock = tmp_path / "seed", tmp_path / "seed.sock"
    off = ("--embedding-provider", "off")
    ids: list[str] = []
    with socket_engine(seed, seed_sock, *off), client(seed_sock) as http:
        for sent in (
            call("remember", {"statement": "Ada owns the fjord deploy"}),
            call("save_memory", {"subject": "fjord", "predicate": "region", "object": "eu-north"}),
            call("remember_note", {"text": "the fjord deploy was rolled back twice", "date": "2026-03-12"}),
        ):
            reply = http.post("/mcp", content=body_of(sent), headers=headers_for(sent)).json()
            assert not reply["result"].get("isError"), reply
            ids.append(reply["result"]["structuredContent"]["id"])
    shutil.copytree(seed, tmp_path / "lean")
    shutil.copytree(seed, tmp_path / "sdk")
    lean_sock, sdk_sock = tmp_path / "lean.sock", tmp_path / "sdk.sock"
    with (
        socket_engine(tmp_path / "lean", lean_sock, *off),
        socket_engine(tmp_path / "sdk", sdk_sock, *off, "--sdk-replies"),
        client(lean_sock) as lean,
        client(sdk_sock) as sdk,
    ):
        yield lean, sdk, ids


def by_id(ids: list[str]) -> list[tuple[str, Any, dict[str, str]]]:
    """Calls on the seeded memories (the same ids on both sides: copies of one workspace)."""
    note, fact, log = ids
    return [
        ("retrieve_memory, by id", call("retrieve_memory", {"id": fact}), {}),
        ("retire_memory", call("retire_memory", {"id": note, "reason": "superseded by the runbook"}), {}),
        ("retire_memory, again", call("retire_memory", {"id": note}), {}),
        ("retire_memory, read-only", call("retire_memory", {"id": fact}), {"x_almanac_read_only": "1"}),
        ("restore_memory", call("restore_memory", {"id": note}), {}),
        ("restore_memory, not retired", call("restore_memory", {"id": log}), {}),
        ("retire_memory, a fact", call("retire_memory", {"id": fact}), {}),
        ("retrieve_memory, a retired fact by id", call("retrieve_memory", {"id": fact}), {}),
    ]


@contextlib.contextmanager
def client(sock: Path) -> Iterator[httpx.Client]:
    with httpx.Client(
        transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost", timeout=30.0
    ) as http:
        yield http


def seen(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """What the client sees, with minted ids and times masked (same lengths, so the length stays)."""
    assert int(response.headers.get("content-length", len(response.content))) == len(response.content)
    headers = [(k, v) for k, v in response.headers.multi_items() if k != "date"]
    return response.status_code, headers, _MINTED.sub(lambda m: b"#" * len(m.group()), response.content)


def _reads_background_state(sent: Any) -> bool:
    """``memory_status`` (alone or in a batch): its reply reports the index's own background work
    (sessions waiting), which each engine finishes on its own schedule — the indexer waits a moment
    after a write before it works (``engine/index/indexer.py``) — and the index's size on disk, which
    depends on when SQLite checkpoints its write-ahead log in each process."""
    if isinstance(sent, list):
        return bool(sent) and all(_reads_background_state(one) for one in sent)
    return (
        isinstance(sent, dict)
        and sent.get("method") == "tools/call"
        and (sent.get("params") or {}).get("name") == "memory_status"
    )


# the index's bytes on disk in memory_status's reply: in its text (JSON inside JSON) and structured
_INDEX_SIZE = re.compile(rb'(\\?"index\\?": ?)\d+')


def _without_index_size(
    reply: tuple[int, list[tuple[str, str]], bytes],
) -> tuple[int, list[tuple[str, str]], bytes]:
    """The reply with the index's size masked, and so without its length (``seen`` checked it)."""
    status, headers, body = reply
    masked = _INDEX_SIZE.sub(rb"\1#", body)
    return status, [(k, v) for k, v in headers if k != "content-length"], masked


def _settled_replies(
    lean: httpx.Client, sdk: httpx.Client, content: bytes, headers: dict[str, str], timeout: float = 10.0
) -> tuple[Any, Any]:
    """Ask both engines the same read until their replies agree (their background work done) or
    ``timeout`` seconds pass; the last pair either way (no fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        ours = _without_index_size(seen(lean.post("/mcp", content=content, headers=headers)))
        theirs = _without_index_size(seen(sdk.post("/mcp", content=content, headers=headers)))
        if ours == theirs or time.monotonic() > deadline:
            return ours, theirs
        time.sleep(0.02)


@pytest.mark.req("engine:surface", "perf:gateway")
def test_the_lean_path_answers_byte_for_byte_as_the_sdk(tmp_path: Path) -> None:
    with engines(tmp_path) as (lean, sdk, ids):
        for what, sent, extra in PLAIN + ODD + by_id(ids):
            content, headers = body_of(sent), headers_for(sent, **extra)
            if _reads_background_state(sent):
                ours_seen, theirs_seen = _settled_replies(lean, sdk, content, headers)
                assert ours_seen == theirs_seen, what
                continue
            ours = lean.post("/mcp", content=content, headers=headers)
            theirs = sdk.post("/mcp", content=content, headers=headers)
            assert seen(ours) == seen(theirs), what
        # the writes above happened on both sides alike: what each now holds reads the same
        final = call("retrieve_memory", {"subject": "fjord", "include_history": True})
        ours = lean.post("/mcp", content=body_of(final), headers=headers_for(final))
        theirs = sdk.post("/mcp", content=body_of(final), headers=headers_for(final))
        assert seen(ours) == seen(theirs)
        assert ours.json()["result"]["structuredContent"]["facts"]


@pytest.mark.anyio
async def test_only_plain_requests_take_the_lean_path() -> None:
    """Which of the requests above the lean path answers itself: every plain one, and the SDK's own
    refusal of a bad Host, Origin or Content-Type (its entry's first check); none of the others."""
    lean = Lean(build_server(Served())._lowlevel_server, SOCKET_SECURITY)
    refused = {"wrong Content-Type", "a foreign Host", "a foreign Origin"}
    for what, sent, extra in PLAIN + ODD:
        headers = headers_for(sent, **{"host": "localhost", **extra})
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [
            (k.encode(), v.encode()) for k, v in headers.items() if v
        ]}  # fmt: skip
        try:
            decoded: Any = json.loads(body_of(sent))
        except ValueError:
            decoded = NOT_JSON
        verdict = await lean.checked(Request(scope), decoded)
        if what in refused:
            assert isinstance(verdict, Response), what
        else:
            assert isinstance(verdict, Plain) == ((what, sent, extra) in PLAIN), what


@pytest.mark.anyio
async def test_header_lines_the_quick_checks_leave_to_the_sdk() -> None:
    """The checks' quick path (JSON Content-Type, a listed Host, no Origin, the clients' usual
    Accept) only ever accepts; other header lines go to the SDK's own checks, duplicates included."""
    lean = Lean(build_server(Served())._lowlevel_server, SOCKET_SECURITY)
    sent = call("memory_status", {})

    async def verdict(*lines: tuple[str, str]) -> object:
        base = [(k, v) for k, v in headers_for(sent, host="localhost").items() if k not in dict(lines)]
        raw = [(k.encode(), v.encode()) for k, v in [*base, *lines]]
        return await lean.checked(Request({"type": "http", "method": "POST", "headers": raw}), sent)

    assert isinstance(await verdict(), Plain)
    assert isinstance(await verdict(("accept", "application/json")), Plain)  # the SDK's parser: JSON
    assert await verdict(("accept", "text/event-stream;q=1")) is None
    assert isinstance(await verdict(("content-type", "Application/JSON; charset=utf-8")), Plain)
    assert isinstance(await verdict(("host", "[::1]:9000")), Plain)  # the SDK's wildcard-port rule
    assert isinstance(await verdict(("origin", "")), Plain)  # an empty Origin: the SDK lets it pass
    assert isinstance(await verdict(("host", "")), Response)  # an empty Host: the SDK refuses it
    assert isinstance(await verdict(("origin", "http://127.0.0.1:3000")), Plain)
    assert isinstance(await verdict(("origin", "null")), Response)
    assert await verdict(("mcp-method", "tools/call"), ("mcp-method", "tools/call")) is None


@pytest.mark.req("engine:mcp", "engine:surface")
def test_bad_params_and_what_is_not_served_answer_invalid_params_with_a_message(tmp_path: Path) -> None:
    with engines(tmp_path) as (lean, sdk, _):
        for http in (lean, sdk):
            for what, sent, extra, said in INVALID_PARAMS:
                reply = http.post("/mcp", content=body_of(sent), headers=headers_for(sent, **extra)).json()
                assert reply["error"]["code"] == -32602 and reply["error"]["message"] == said, what
            sent = message("server/discover", {})
            found = http.post("/mcp", content=body_of(sent), headers=headers_for(sent)).json()
            assert set(found["result"]["capabilities"]) == {"logging", "tools"}  # no prompts, no resources
