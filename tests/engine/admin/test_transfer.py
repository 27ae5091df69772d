"""``/admin/export`` and ``/admin/import`` on a RUNNING engine (``life:export``, ``life:import``):
the offline modes refuse while an engine serves the workspace; these work through it, and what
arrives is recalled at once."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.admin.transfer import indexed_line
from engine.transfer.archive import MANIFEST, store_files
from tests.engine.support import socket_client, socket_engine
from tests.vaults import NOTES, SKIPPED, many_notes_zip, vault_zip


@contextmanager
def engine_http(workspace: Path, sock: Path) -> Iterator[httpx.Client]:
    with (
        socket_engine(workspace, sock),
        httpx.Client(
            transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost", timeout=60
        ) as http,
    ):
        yield http


def call(sock: Path, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with socket_client(sock) as client:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return dict(result.structured_content)

    return anyio.run(run)


def fill(sock: Path) -> None:
    """Memories of every kind, with history: a fact changed twice, a retired note, log entries."""
    call(sock, "save_memory", {"subject": "Fjord", "predicate": "database", "object": "MySQL"})
    call(sock, "save_memory", {"subject": "Fjord", "predicate": "database", "object": "Postgres"})
    call(sock, "remember", {"statement": "Ines prefers morning meetings", "scope": "team"})
    wrong = call(sock, "remember", {"statement": "The standup is at 11"})
    call(sock, "retire_memory", {"id": wrong["id"], "reason": "moved to 9:30"})
    call(sock, "remember_note", {"text": "Deployed v2 to staging"})


def listing(http: httpx.Client) -> list[dict[str, Any]]:
    return sorted(http.get("/admin/memories", params={"limit": "200"}).json()["items"], key=lambda r: r["id"])


@pytest.mark.req("life:export", "life:import")
def test_export_from_a_running_engine_restores_losslessly_into_a_new_one(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    with engine_http(first, tmp_path / "a.sock") as http:
        fill(tmp_path / "a.sock")
        history = call(tmp_path / "a.sock", "retrieve_memory", {"subject": "Fjord", "predicate": "database"})
        exported = http.get("/admin/export")
        assert exported.status_code == 200 and exported.headers["content-type"] == "application/zip"
        before = listing(http)
    with zipfile.ZipFile(io.BytesIO(exported.content)) as archive:
        manifest = json.loads(archive.read(MANIFEST))
        assert {f["path"] for f in manifest["files"]} == {str(p) for p in store_files(first)}
        for f in manifest["files"]:
            assert archive.read(f["path"]) == (first / f["path"]).read_bytes()
    assert manifest["counts"] == {"notes": 2, "retired_notes": 1, "log_entries": 1, "facts": 1}

    with engine_http(second, tmp_path / "b.sock") as http:
        restored = http.post("/admin/import", content=exported.content)
        assert restored.status_code == 200, restored.text
        assert restored.json()["kind"] == "restore" and restored.json()["counts"] == manifest["counts"]
        assert listing(http) == before
        for rel in store_files(first):  # byte for byte, before anything reads (and cites) them
            assert (second / rel).read_bytes() == (first / rel).read_bytes()
        again = call(tmp_path / "b.sock", "retrieve_memory", {"subject": "Fjord", "predicate": "database"})
        assert again == history  # the fact's whole history, value by value
        found = call(
            tmp_path / "b.sock", "get_context", {"query": "when does Ines like meetings?", "scope": "team"}
        )
        assert "morning meetings" in json.dumps(found)
        # a second restore is refused: the workspace is no longer empty, and nothing changes
        refused = http.post("/admin/import", content=exported.content)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_import"
        assert "already holds memories" in refused.json()["error"]["message"]
        assert listing(http) == before


@pytest.mark.req("life:import")
def test_markdown_imported_into_a_running_engine_is_recalled_at_once(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    with engine_http(ws, sock) as http:
        call(sock, "remember", {"statement": "Already here before the import"})
        bad = http.post("/admin/import", params={"label": "../up"}, content=vault_zip())
        assert bad.status_code == 400 and "bad label" in bad.json()["error"]["message"]
        not_zip = http.post("/admin/import", params={"label": "Vault"}, content=b"# just markdown\n")
        assert not_zip.status_code == 400 and "not a zip file" in not_zip.json()["error"]["message"]
        unlabelled = http.post("/admin/import", content=vault_zip())
        assert unlabelled.status_code == 400 and "needs a label" in unlabelled.json()["error"]["message"]
        assert not (ws / "notes" / "Imported").exists()

        reply = http.post("/admin/import", params={"label": "Obsidian"}, content=vault_zip())
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["folder"] == "notes/Imported/Obsidian"
        assert sorted(body["imported"]) == sorted(
            "notes/Imported/Obsidian/" + name.replace(".markdown", ".md") for name in NOTES
        )
        assert body["progress"][0] == "import: 7 files found in the upload"  # 2 unsafe ones never read
        assert not any(str(tmp_path) in line or "/tmp" in line for line in body["progress"])
        reasons = {s["path"]: s["reason"] for s in body["skipped"]}
        assert set(reasons) == set(SKIPPED)
        for name, word in SKIPPED.items():
            assert word in reasons[name], (name, reasons[name])
        for name, text in NOTES.items():  # byte for byte: frontmatter and wikilinks kept
            target = ws / "notes" / "Imported" / "Obsidian" / name.replace(".markdown", ".md")
            assert target.read_text(encoding="utf-8") == text
        assert (
            not (tmp_path / "escape.md").exists() and not (ws / "notes" / "Imported" / "escape.md").exists()
        )
        found = call(sock, "get_context", {"query": "who runs the Fjord migration?"})
        assert "Ines Duarte runs the Fjord migration" in json.dumps(found)
        assert http.get("/admin/memories", params={"q": "Designing Data"}).json()["total"] == 1
        again = http.post("/admin/import", params={"label": "Obsidian"}, content=vault_zip())
        assert again.status_code == 400 and "already exists" in again.json()["error"]["message"]


def events_of(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.strip()]


@pytest.mark.req("life:import")
def test_an_import_streams_its_progress_then_the_summary(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    streamed = {"accept": "application/x-ndjson"}
    with engine_http(ws, sock) as http:
        # what can be refused without writing is refused before the stream starts, as plain JSON
        (ws / "notes" / "Imported" / "Taken").mkdir(parents=True)
        taken = http.post("/admin/import", params={"label": "Taken"}, content=vault_zip(), headers=streamed)
        assert taken.status_code == 400 and "already exists" in taken.json()["error"]["message"]
        unlabelled = http.post("/admin/import", content=vault_zip(), headers=streamed)
        assert unlabelled.status_code == 400 and "needs a label" in unlabelled.json()["error"]["message"]

        with http.stream(
            "POST", "/admin/import", params={"label": "Many"}, content=many_notes_zip(300), headers=streamed
        ) as reply:
            assert reply.status_code == 200 and reply.headers["content-type"] == "application/x-ndjson"
            events = events_of(list(reply.iter_lines()))
        progress = [e["progress"] for e in events if "progress" in e]
        assert progress[0] == "import: 300 files found in the upload"
        assert "import: copied 300 of 300 files" in progress
        assert progress[-2] == "import: indexing what arrived"
        assert progress[-1].startswith("import: indexed; searchable")
        assert list(events[-1]) == ["result"] and all("result" not in e for e in events[:-1])
        result = events[-1]["result"]
        assert len(result["imported"]) == 300 and result["progress"] == progress
        assert http.get("/admin/memories", params={"q": "kelp farm 217"}).json()["total"] >= 1


@pytest.mark.req("life:import")
def test_an_import_finishes_when_the_caller_leaves_mid_stream(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    with engine_http(ws, sock) as http:
        with http.stream(
            "POST",
            "/admin/import",
            params={"label": "Left"},
            content=many_notes_zip(400),
            headers={"accept": "application/x-ndjson"},
        ) as reply:
            first = json.loads(next(reply.iter_lines()))
            assert first == {"progress": "import: 400 files found in the upload"}
        # the caller hung up after the first line; the engine finishes the import on its own
        deadline = time.monotonic() + 60
        while http.get("/admin/memories", params={"q": "kelp", "limit": "1"}).json()["total"] < 400:
            assert time.monotonic() < deadline, "the import did not finish after the caller left"
            time.sleep(0.05)  # a poll interval, not a wait for something to happen
        folder = ws / "notes" / "Imported" / "Left"
        assert len(list(folder.rglob("*.md"))) == 400
        assert not [p for p in ws.iterdir() if p.name.startswith(".transfer-")]  # nothing staged is left


@pytest.mark.req("rel:kill", "life:import")
def test_a_staging_folder_left_by_a_crash_is_removed_at_start(tmp_path: Path) -> None:
    """kill -9 of the engine mid-import leaves ``.transfer-import/``; the next start removes it, and
    the import made again arrives once."""
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    upload = many_notes_zip(3000)
    staging = ws / ".transfer-import"
    with socket_engine(ws, sock, "--embedding-provider", "off") as proc:

        def send() -> None:
            with (
                contextlib.suppress(httpx.HTTPError),
                httpx.Client(
                    transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost", timeout=300
                ) as http,
            ):
                http.post("/admin/import", params={"label": "Big"}, content=upload)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        deadline = time.monotonic() + 180
        while not (staging.is_dir() and any(staging.rglob("*.md"))):
            assert time.monotonic() < deadline, "the import never began staging"
            time.sleep(0.02)  # poll interval of a bounded wait
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        sender.join(timeout=30)
    assert staging.is_dir() and not (ws / "notes" / "Imported").exists()  # the crash left it behind
    with engine_http(ws, tmp_path / "b.sock") as http:
        assert not staging.exists()
        assert http.get("/admin/memories", params={"limit": "1"}).json()["items"] == []
        again = http.post("/admin/import", params={"label": "Big"}, content=upload)
        assert again.status_code == 200 and len(again.json()["imported"]) == 3000
    assert [p.name for p in (ws / "notes" / "Imported").iterdir()] == ["Big"]
    assert len(list((ws / "notes" / "Imported" / "Big").rglob("*.md"))) == 3000


@pytest.mark.req("life:import")
def test_the_last_import_line_says_what_still_waits_for_embeddings() -> None:
    assert indexed_line(0) == "import: indexed; searchable now"
    said = indexed_line(12)
    assert said.startswith("import: indexed; searchable by its words now")
    assert "the 12 chunks and facts still waiting are embedded in the background" in said
