"""``retrieval-log.jsonl``: one line per search, never memory content (``life:retrieval-log``)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.ageing.retrieval_log import LOG, ROTATED
from engine.recall.query import words_of
from engine.recall.status import memory_status
from engine.scope import Caller
from tests.engine.ageing.helpers import CALLER, aged_engine
from tests.engine.conftest import Clock

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
NOTES = [
    "The osprey gateway terminates TLS for every tenant.",
    "Quokka builds are cached in the marmot bucket for nine days.",
    "Our wombat dashboard shows p99 response times per region.",
    "Narwhal is the codename of the billing rewrite.",
]


@pytest.mark.req("life:retrieval-log")
def test_one_line_per_search_with_ids_and_numbers_but_no_content(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    with aged_engine(root, Clock(T0)) as e:
        ids = [e.memory.remember(CALLER, text, tags=["zebra-tag"]).id for text in NOTES]
        fact = e.memory.save_memory(CALLER, "Narwhal", "owner", "the payments squad").id
        pinned = Caller(connection="Claude Code on laptop", pinned_scope=None)
        queries = ["osprey gateway TLS", "marmot bucket", "narwhal owner", None, "nothing like this at all"]
        replies = [e.recall.get_context(pinned if q else CALLER, q) for q in queries]
        lines = [json.loads(line) for line in (root / LOG).read_text().splitlines()]
        assert len(lines) == len(queries)
        first = lines[0]
        assert first["ts"].startswith("2026-05-01T12:00:00.")
        assert first["query_sha256"] == hashlib.sha256(b"osprey gateway TLS").hexdigest()
        assert "query" not in first
        assert first["kept"][0] == ids[0] and first["kept"] == [
            i["id"] for i in replies[0]["facts"] + replies[0]["notes"]
        ]
        assert first["mode"] == "keyword" and first["destination"] == "get_context"
        assert first["source"] == "Claude Code on laptop"
        assert first["loaded"] >= len(first["kept"])
        assert first["trimmed"] == first["loaded"] - len(first["kept"])
        assert first["tokens"] == replies[0]["tokens"] and first["latency_ms"] >= 0
        assert len(first["scores"]) == len(first["kept"])
        assert fact in lines[2]["kept"]
        assert lines[3]["mode"] == "facts" and "query_sha256" not in lines[3]
        log_text = (root / LOG).read_text()
        everything = [*NOTES, "Narwhal", "the payments squad", "zebra-tag"]
        for text in everything:  # no memory's words, and no query's words, are in the log
            assert text not in log_text
            for word in words_of(text):
                if len(word) > 3:
                    assert word not in log_text.lower(), word
        for q in queries:
            assert q is None or q not in log_text
        status = memory_status(e.recall, CALLER)
        assert status["storage_bytes"]["store"] < sum(p.stat().st_size for p in root.rglob("*.md")) + 4096


@pytest.mark.req("life:retrieval-log")
def test_the_owner_may_allow_queries_and_the_log_rotates_by_size(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    with aged_engine(root, Clock(T0), {"log_queries": True, "retrieval_log_max_bytes": 4096}) as e:
        e.memory.remember(CALLER, "The osprey gateway terminates TLS for every tenant.")
        for n in range(60):
            e.recall.get_context(CALLER, f"osprey gateway question {n}")
        current = (root / LOG).read_text().splitlines()
        rotated = (root / ROTATED).read_text().splitlines()
        assert json.loads(current[-1])["query"] == "osprey gateway question 59"
        assert (root / LOG).stat().st_size <= 4096 and (root / ROTATED).stat().st_size <= 4096
        assert len(current) + len(rotated) < 60  # older lines went with the earlier rotation
        assert json.loads(rotated[-1])["query"] == f"osprey gateway question {59 - len(current)}"
