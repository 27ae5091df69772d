"""Export and import over REST (``gw:rest``, ``life:export``, ``life:import``): a real gateway, real
engines; bearer auth exactly like /mcp (read-only may export but not import, a pinned scope may do
neither), the upload limit, and export → import into a new workspace, lossless."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.e2e import Gateway, start_gateway
from tests.hostile_archives import DAMAGED, nested_paths
from tests.vaults import NOTES, SKIPPED, vault_zip

pytestmark = pytest.mark.req("gw:rest")

OWNER = "tess@example.com"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("transfer")
    gw = start_gateway(tmp / "data", tmp / "gateway.log", import_max_bytes="100000")
    try:
        gw.owner(OWNER)
        gw.cli("workspace", "create", "copy", "--owner", OWNER)
        yield gw
    finally:
        gw.stop()


def call(gateway: Gateway, token: str, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}
    return httpx.request(method, gateway.url + "/api/v1" + path, headers=headers, timeout=120, **kw)


def refused(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["error"]["code"], body["error"]["message"]


@pytest.mark.req("life:import", "life:export")
def test_export_then_import_into_a_new_workspace_over_rest(gateway: Gateway) -> None:
    writer = gateway.token(OWNER, "Script")
    for value in ("MySQL", "Postgres"):
        fact = {"subject": "Fjord", "predicate": "database", "object": value, "statement": f"Fjord: {value}"}
        assert call(gateway, writer, "POST", "/facts", json=fact).status_code == 200
    note = call(gateway, writer, "POST", "/memories", json={"statement": "The standup is at 11"}).json()
    call(gateway, writer, "POST", f"/memories/{note['id']}/retire", json={"reason": "moved"})
    zipped = {"content": vault_zip(), "headers": {"Content-Type": "application/zip"}}
    imported = call(gateway, writer, "POST", "/admin/import", params={"label": "Vault"}, **zipped)
    assert imported.status_code == 200, imported.text
    outcome = imported.json()
    assert outcome["kind"] == "markdown" and len(outcome["imported"]) == len(NOTES)
    assert {s["path"] for s in outcome["skipped"]} == set(SKIPPED)
    # synchronous: the reply comes once the import is indexed, with every progress line in it
    assert outcome["progress"][0].startswith("import: ") and "files found" in outcome["progress"][0]
    assert outcome["progress"][-1].startswith("import: indexed; searchable")
    found = call(gateway, writer, "POST", "/context", json={"query": "who runs the Fjord migration?"})
    assert "Ines Duarte" in found.text
    history_query = {"subject": "Fjord", "predicate": "database", "include_history": "true"}
    history = call(gateway, writer, "GET", "/memories", params=history_query).json()

    reader = gateway.token(OWNER, "Reader", "--read-only")
    exported = call(gateway, reader, "GET", "/admin/export")  # a read-only connection may export
    assert exported.status_code == 200 and exported.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(exported.content)) as archive:
        manifest = json.loads(archive.read("almanac-export.json"))
        exported_files = {f["path"]: archive.read(f["path"]) for f in manifest["files"]}
    assert manifest["counts"]["facts"] == 1 and manifest["counts"]["retired_notes"] == 1

    copy = gateway.token(OWNER, "Copy script", "--workspace", "copy")
    restored = call(gateway, copy, "POST", "/admin/import", content=exported.content)
    assert restored.status_code == 200 and restored.json()["kind"] == "restore", restored.text
    assert restored.json()["counts"] == manifest["counts"]
    target = gateway.workspace_dir(OWNER, "copy")
    for path, data in exported_files.items():  # every memory, byte for byte
        assert (target / path).read_bytes() == data
    assert call(gateway, copy, "GET", "/memories", params=history_query).json() == history
    again = call(gateway, copy, "POST", "/admin/import", content=exported.content)
    assert refused(again)[:2] == (400, "bad_import") and "already holds memories" in refused(again)[2]


def hostile_export(settings: dict[str, object]) -> bytes:
    """An Almanac export (built here, not a blob) of a workspace holding only ``settings.json``."""
    data = json.dumps(settings).encode()
    manifest = {
        "format": "almanac-export",
        "version": 1,
        "exported_at": "2026-01-01T00:00:00Z",
        "workspace": "elsewhere",
        "counts": {"notes": 0, "retired_notes": 0, "log_entries": 0, "facts": 0},
        "files": [{"path": "settings.json", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}],
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("almanac-export.json", json.dumps(manifest))
        archive.writestr("settings.json", data)
    return out.getvalue()


@pytest.mark.req("sec:authz", "life:import")
def test_a_restored_export_cannot_choose_where_memories_are_sent(gateway: Gateway) -> None:
    gateway.cli("workspace", "create", "restored", "--owner", OWNER)
    token = gateway.token(OWNER, "Restore script", "--workspace", "restored")
    hostile = {"vertex_base_url": "http://127.0.0.1:9/v1", "vertex_project": "theirs", "notes_limit": 4}
    restored = call(gateway, token, "POST", "/admin/import", content=hostile_export(hostile))
    assert restored.status_code == 200 and restored.json()["kind"] == "restore", restored.text
    warnings = [line for line in restored.json()["progress"] if "warning" in line]
    assert warnings == [
        "import: warning: the export's settings.json set vertex_base_url, which is the operator's; removed",
        "import: warning: the export's settings.json set vertex_project, which is the operator's; removed",
    ]
    on_disk = json.loads((gateway.workspace_dir(OWNER, "restored") / "settings.json").read_text())
    assert on_disk == {"notes_limit": 4}  # the rest of the workspace's settings came across
    status = call(gateway, token, "GET", "/status").json()
    assert status["settings"]["vertex_base_url"] is None and status["settings"]["vertex_project"] is None


def test_read_only_and_pinned_connections_are_refused_what_they_may_not_do(gateway: Gateway) -> None:
    reader = gateway.token(OWNER, "Read only", "--read-only")
    pinned = gateway.token(OWNER, "Pinned", "--scope", "project:fjord")
    zipped = {"content": vault_zip(), "params": {"label": "Nope"}}
    status, code, message = refused(call(gateway, reader, "POST", "/admin/import", **zipped))
    assert (status, code) == (403, "read_only") and "can export but not import" in message
    status, code, message = refused(call(gateway, pinned, "POST", "/admin/import", **zipped))
    assert (status, code) == (403, "forbidden") and "pinned to scope 'project:fjord'" in message
    status, code, message = refused(call(gateway, pinned, "GET", "/admin/export"))
    assert (status, code) == (403, "forbidden") and "holds the whole workspace" in message
    assert call(gateway, "not-a-token", "GET", "/admin/export").status_code == 401
    assert not (gateway.workspace_dir(OWNER) / "notes" / "Imported" / "Nope").exists()


def test_bad_uploads_say_what_to_fix_and_write_nothing(gateway: Gateway, tmp_path: Path) -> None:
    writer = gateway.token(OWNER, "Uploader")
    big = call(gateway, writer, "POST", "/admin/import", params={"label": "Big"}, content=b"x" * 100_001)
    status, code, message = refused(big)
    assert (status, code) == (413, "payload_too_large") and "(100,000 bytes)" in message

    def streamed() -> Iterator[bytes]:  # no Content-Length: the limit holds as the body arrives
        for _ in range(30):
            yield b"x" * 5000

    status, code, _ = refused(
        call(gateway, writer, "POST", "/admin/import", params={"label": "Big"}, content=streamed())
    )
    assert (status, code) == (413, "payload_too_large")
    status, code, message = refused(call(gateway, writer, "POST", "/admin/import", content=vault_zip()))
    assert (status, code) == (400, "bad_import") and "needs a label" in message
    bad = call(gateway, writer, "POST", "/admin/import", params={"label": "a/../b"}, content=vault_zip())
    assert refused(bad)[:2] == (400, "bad_import") and "bad label" in refused(bad)[2]
    not_zip = call(gateway, writer, "POST", "/admin/import", params={"label": "Text"}, content=b"# hi\n")
    assert refused(not_zip)[:2] == (400, "bad_import") and "not a zip file" in refused(not_zip)[2]
    imported = gateway.workspace_dir(OWNER) / "notes" / "Imported"
    assert not any((imported / name).exists() for name in ("Big", "Text", "b"))


@pytest.mark.req("life:import", "rel:fuzz")
def test_damaged_uploads_are_a_bad_import_that_says_what_is_wrong(gateway: Gateway) -> None:
    gateway.cli("workspace", "create", "damaged", "--owner", OWNER)
    token = gateway.token(OWNER, "Damaged script", "--workspace", "damaged")
    folder = gateway.workspace_dir(OWNER, "damaged")
    zipped = {"headers": {"Content-Type": "application/zip"}}
    for kind, (build, words) in sorted(DAMAGED.items()):
        reply = call(gateway, token, "POST", "/admin/import", content=build(), **zipped)
        status, code, message = refused(reply)
        assert (status, code) == (400, "bad_import"), (kind, reply.text)
        assert words in message and "nothing was written" in message, (kind, message)
    bomb = call(
        gateway, token, "POST", "/admin/import", params={"label": "Bomb"}, content=nested_paths(), **zipped
    )
    assert bomb.status_code == 200 and len(bomb.json()["skipped"]) == 3  # too deep or long: skipped
    stored = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert [p for p in stored if not p.startswith(".")] == ["notes/Imported/Bomb/fine.md"]
    assert not any(p.startswith(".transfer") for p in stored)
