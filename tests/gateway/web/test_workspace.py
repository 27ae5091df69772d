"""The Workspace page over real HTTP with real engines (SPEC §11 Workspace; ``life:import``,
``life:export``): usage, importing a zip or picked files through the RUNNING engine (skipped files
listed with the reason), the upload limit, and export → import into a new workspace, lossless."""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from markupsafe import escape
from playwright.sync_api import Page, expect

from gateway import layout
from gateway.engines import admin
from gateway.web import importing
from tests.gateway.e2e import Gateway
from tests.gateway.web.conftest import Site, csrf_of, running_site, site_in_thread
from tests.gateway.web.test_account import sign_up
from tests.gateway.web.test_erase import make_token
from tests.gateway.web.test_pages import PASSWORD, assert_accessible
from tests.hostile_archives import DAMAGED
from tests.vaults import NOTES, SKIPPED, many_notes_zip, vault_zip

EMAIL = "wren@example.com"


async def api(site: Site, token: str, method: str, path: str, **kw: Any) -> Any:
    async with httpx.AsyncClient(base_url=site.url, timeout=60) as client:
        reply = await client.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)
    assert reply.status_code == 200, reply.text
    return reply.json()


async def import_form(client: httpx.AsyncClient, workspace: str = "default", **fields: str) -> dict[str, str]:
    page = await client.get("/workspace", params={"workspace": workspace})
    assert page.status_code == 200, page.text
    return {"csrf_token": csrf_of(page.text), "workspace": workspace, **fields}


def store_files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.relative_to(folder).parts[0].startswith(".")
    }


@pytest.mark.anyio
@pytest.mark.req("life:import")
async def test_import_a_vault_zip_and_picked_files_through_the_running_engine(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, EMAIL)
        token = await make_token(client, "Laptop")
        await api(site, token, "POST", "/api/v1/memories", json={"statement": "Here before the import"})
        page = await client.get("/workspace")
        assert '<h2 id="usage">Usage</h2>' in page.text and "Markdown store" in page.text

        form = await import_form(client, label="Obsidian")
        files = {"archive": ("vault.zip", vault_zip(), "application/zip")}
        done = await client.post("/workspace/import", data=form, files=files)
        assert done.status_code == 200, done.text
        assert f"{len(NOTES)} notes imported into" in done.text and "notes/Imported/Obsidian/" in done.text
        for name in SKIPPED:
            assert name in done.text
        assert "its path would land outside the target folder" in done.text
        assert "binary, or not UTF-8 text" in done.text
        # recalled at once through the same engine, wikilinks and frontmatter kept on disk
        found = await api(
            site, token, "POST", "/api/v1/context", json={"query": "who runs the Fjord migration?"}
        )
        assert "Ines Duarte runs the Fjord migration" in json.dumps(found)
        owner = site.store.owners.by_email(EMAIL)
        folder = layout.workspace_dir(data_dir, site.store.owners.workspaces(owner.id)[0].id)
        imported = folder / "notes" / "Imported" / "Obsidian"
        assert (imported / "Projects" / "Fjord.md").read_text(encoding="utf-8") == NOTES["Projects/Fjord.md"]
        audit = site.store.audit_log.events(owner_id=owner.id)[0]
        assert audit.kind == "workspace.import"
        assert audit.detail == {"kind": "markdown", "imported": len(NOTES), "skipped": len(SKIPPED)}
        page = await client.get("/workspace")
        assert '<th scope="row">Notes</th><td>5</td>' in page.text  # 1 remembered + 4 imported

        # picked files: a folder picked whole keeps its sub-folders, without its own name
        form = await import_form(client, label="Picked")
        picked = [
            ("files", ("vault/Projects/Kelp.md", b"Kelp grows fast. See [[Fjord]].\n", "text/markdown")),
            ("files", ("vault/diagram.png", b"\x89PNG\r\n", "image/png")),
        ]
        done = await client.post("/workspace/import", data=form, files=picked)
        assert done.status_code == 200 and "1 note imported" in done.text and "not Markdown" in done.text
        assert (folder / "notes" / "Imported" / "Picked" / "Projects" / "Kelp.md").is_file()


@pytest.mark.anyio
@pytest.mark.req("life:import")
async def test_bad_imports_are_refused_with_what_to_fix_and_change_nothing(tmp_path: Path) -> None:
    async with running_site(tmp_path / "data", import_max_bytes=4096) as site, site.client() as client:
        await sign_up(client, EMAIL)
        owner = site.store.owners.by_email(EMAIL)
        folder = layout.workspace_dir(tmp_path / "data", site.store.owners.workspaces(owner.id)[0].id)
        zipped = {"archive": ("vault.zip", vault_zip(), "application/zip")}
        nothing = await client.post("/workspace/import", data=await import_form(client, label="A"))
        assert nothing.status_code == 400 and "Choose a .zip file or pick Markdown files" in nothing.text
        both = await client.post(
            "/workspace/import",
            data=await import_form(client, label="A"),
            files=[("archive", zipped["archive"]), ("files", ("a.md", b"x", "text/markdown"))],
        )
        assert both.status_code == 400 and "not both" in both.text
        bad = await client.post(
            "/workspace/import", data=await import_form(client, label="../etc"), files=zipped
        )
        assert bad.status_code == 400 and "Bad label" in bad.text and "nothing was written" in bad.text
        unlabelled = await client.post("/workspace/import", data=await import_form(client), files=zipped)
        assert unlabelled.status_code == 400 and "needs a label" in unlabelled.text
        not_zip = await client.post(
            "/workspace/import",
            data=await import_form(client, label="A"),
            files={"archive": ("notes.zip", b"# not a zip", "application/zip")},
        )
        assert not_zip.status_code == 400 and "not a zip file" in not_zip.text
        big = {"archive": ("big.zip", b"x" * 5000, "application/zip")}
        over = await client.post("/workspace/import", data=await import_form(client, label="A"), files=big)
        assert over.status_code == 413 and "larger than this server accepts (4,096 bytes)" in over.text
        forged = await client.post(
            "/workspace/import",
            data={"csrf_token": "forged", "label": "A", "workspace": "default"},
            files=zipped,
        )
        assert forged.status_code == 403
        assert not (folder / "notes" / "Imported").exists()
        assert "workspace.import" not in [e.kind for e in site.store.audit_log.events(owner_id=owner.id)]


@pytest.mark.anyio
@pytest.mark.req("life:import", "rel:fuzz")
async def test_a_damaged_upload_is_refused_on_the_page_with_what_is_wrong(tmp_path: Path) -> None:
    async with running_site(tmp_path / "data") as site, site.client() as client:
        await sign_up(client, EMAIL)
        owner = site.store.owners.by_email(EMAIL)
        folder = layout.workspace_dir(tmp_path / "data", site.store.owners.workspaces(owner.id)[0].id)
        for kind, (build, words) in sorted(DAMAGED.items()):
            upload = {"archive": (f"{kind}.zip", build(), "application/zip")}
            reply = await client.post("/workspace/import", data=await import_form(client), files=upload)
            assert reply.status_code == 400, (kind, reply.text[:300])
            assert str(escape(words)) in reply.text and "nothing was written" in reply.text, kind
        assert [p for p in store_files(folder) if not p.startswith("settings")] == []


@pytest.mark.anyio
@pytest.mark.req("life:export", "life:import")
async def test_export_then_import_into_a_new_workspace_is_lossless(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, EMAIL)
        owner = site.store.owners.by_email(EMAIL)
        copy = site.store.owners.create_workspace(owner.id, "copy")
        token = await make_token(client, "Laptop")
        for value in ("MySQL", "Postgres", "CockroachDB"):
            fact = {"subject": "Fjord", "predicate": "database", "object": value}
            await api(site, token, "POST", "/api/v1/facts", json={**fact, "statement": f"Fjord uses {value}"})
        note = await api(site, token, "POST", "/api/v1/memories", json={"statement": "The standup is at 11"})
        await api(site, token, "POST", f"/api/v1/memories/{note['id']}/retire", json={"reason": "moved"})
        await api(
            site,
            token,
            "POST",
            "/api/v1/memories",
            json={"statement": "Ines likes mornings", "scope": "team"},
        )
        await api(site, token, "POST", "/api/v1/log", json={"text": "Deployed v2 to staging"})
        await client.post(
            "/workspace/import",
            data=await import_form(client, label="Vault"),
            files={"archive": ("vault.zip", vault_zip(), "application/zip")},
        )
        query = {"subject": "Fjord", "predicate": "database", "include_history": "true"}
        history = await api(site, token, "GET", "/api/v1/memories", params=query)

        exported = await client.get("/workspace/export")
        assert exported.status_code == 200 and exported.headers["content-type"] == "application/zip"
        assert exported.headers["content-disposition"].startswith('attachment; filename="almanac-default-')
        with zipfile.ZipFile(io.BytesIO(exported.content)) as archive:
            manifest = json.loads(archive.read("almanac-export.json"))
            names = set(archive.namelist()) - {"almanac-export.json"}
            exported_files = {n: archive.read(n) for n in names}
        assert manifest["counts"] == {"notes": 6, "retired_notes": 1, "log_entries": 1, "facts": 1}
        assert names == {f["path"] for f in manifest["files"]}
        assert {"facts", "notes", "logs"} <= {n.split("/")[0] for n in names}

        form = await import_form(client, "copy")
        restored = await client.post(
            "/workspace/import",
            data=form,
            files={"archive": ("export.zip", exported.content, "application/zip")},
        )
        assert restored.status_code == 200, restored.text
        assert "The export was restored into <strong>copy</strong>" in restored.text
        target = layout.workspace_dir(data_dir, copy.id)
        copied = store_files(target)
        assert {n: copied[n] for n in names} == exported_files  # every memory, byte for byte

        copy_token = await make_token(client, "Copy reader", "copy")
        assert await api(site, copy_token, "GET", "/api/v1/memories", params=query) == history
        found = await api(
            site, copy_token, "POST", "/api/v1/context", json={"query": "who runs the Fjord migration?"}
        )
        assert "Ines Duarte" in json.dumps(found)
        retired = await api(site, copy_token, "GET", f"/api/v1/memories/{note['id']}")
        assert json.dumps(retired).count("The standup is at 11") == 1
        # a second restore into the now-full workspace is refused and changes nothing
        again = await client.post(
            "/workspace/import",
            data=await import_form(client, "copy"),
            files={"archive": ("export.zip", exported.content, "application/zip")},
        )
        assert again.status_code == 400 and "already holds memories" in again.text
        kinds = [e.kind for e in site.store.audit_log.events(owner_id=owner.id)]
        assert "workspace.export" in kinds


def obsidian_folder(root: Path) -> Path:
    """A small Obsidian-style vault on disk: frontmatter, wikilinks, a sub-folder, and one bad file."""
    for name, text in NOTES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "app.json").write_text("{}", encoding="utf-8")
    (root / "Broken.md").write_bytes(b"binary \x00\x01 not text")
    return root


@pytest.mark.req("life:import", "life:export")
def test_import_a_folder_export_and_reimport_in_the_browser(
    site: Gateway, page: Page, tmp_path: Path
) -> None:
    site.cli("owner", "create", EMAIL, stdin=PASSWORD + "\n")
    site.cli("workspace", "create", "copy", "--owner", EMAIL)
    page.goto(site.url + "/login")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/")
    page.get_by_role("link", name="Workspace").click()
    assert_accessible(page)
    assert page.get_by_role("heading", name="Usage").is_visible()

    page.get_by_label("Label").fill("Obsidian")
    page.get_by_label("Or pick a folder").set_input_files(obsidian_folder(tmp_path / "vault"))
    page.get_by_role("button", name="Import").click()
    page.wait_for_url(site.url + "/workspace/import?**")
    assert_accessible(page)
    assert page.get_by_role("status").inner_text() == f"Imported {len(NOTES)}, skipped 2."
    skipped = page.get_by_role("table").inner_text()
    assert "Broken.md\tbinary, or not UTF-8 text" in skipped and ".obsidian/app.json\thidden" in skipped
    assert "notes/Imported/Obsidian/Projects/Fjord.md" in page.get_by_role("list").inner_text()

    page.get_by_role("link", name="Back to the workspace").click()
    with page.expect_download() as download:
        page.get_by_role("link", name="Download export").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name.startswith("almanac-default-") and zipfile.is_zipfile(saved)

    page.get_by_label("Workspace", exact=True).select_option("copy")
    page.get_by_role("button", name="Show").click()
    assert page.get_by_role("heading", level=1).inner_text() == "Workspace copy"
    page.get_by_label("A .zip file").set_input_files(saved)
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"Restored \d+ memories\."))
    assert "The export was restored into copy" in page.get_by_role("main").inner_text()
    page.get_by_role("link", name="See your memories").click()
    page.get_by_label("Words or an id").fill("Ines Duarte")
    page.get_by_label("Words or an id").press("Enter")
    assert "Ines Duarte runs the Fjord migration" in page.get_by_role("main").inner_text()


def hold_the_reply(monkeypatch: pytest.MonkeyPatch, released: Callable[[], Awaitable[None]]) -> None:
    """Hold the engine's final reply (its progress passes) until ``released()`` returns: the seam
    between the page and the engine's event stream, so a test sees progress BEFORE the summary
    without racing the import."""
    real = admin.import_events

    async def held(*args: Any) -> AsyncIterator[Any]:
        async for event in real(*args):
            if isinstance(event, dict) and "result" in event:
                await released()
            yield event

    monkeypatch.setattr(importing, "import_events", held)


@pytest.mark.anyio
@pytest.mark.req("life:import")
async def test_a_large_import_streams_its_progress_before_the_summary(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = anyio.Event()
    hold_the_reply(monkeypatch, seen.wait)
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, EMAIL)
        form = await import_form(client, label="Many")
        files = {"archive": ("many.zip", many_notes_zip(600), "application/zip")}
        body = ""
        async with client.stream("POST", "/workspace/import", data=form, files=files) as reply:
            assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html")
            assert reply.headers["cache-control"] == "no-store"
            async for chunk in reply.aiter_text():
                body += chunk
                if "<li>import: copied 600 of 600 files</li>" in body and not seen.is_set():
                    # the engine has not answered yet (held): the page shows progress, no summary
                    assert "<li>import: 600 files found in the upload</li>" in body
                    assert "Import finished" not in body and 'role="status"' not in body
                    seen.set()
        assert seen.is_set(), body
        assert body.index("<li>import: indexed; searchable") < body.index("Import finished")
        assert "600 notes imported into" in body and body.rstrip().endswith("</html>")
        owner = site.store.owners.by_email(EMAIL)
        audit = site.store.audit_log.events(owner_id=owner.id)[0]
        assert audit.kind == "workspace.import" and audit.detail["imported"] == 600


@pytest.mark.anyio
@pytest.mark.req("life:import")
async def test_an_import_left_mid_way_finishes_and_is_audited(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    left = anyio.Event()
    hold_the_reply(monkeypatch, left.wait)
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, EMAIL)
        owner = site.store.owners.by_email(EMAIL)
        folder = layout.workspace_dir(data_dir, site.store.owners.workspaces(owner.id)[0].id)
        form = await import_form(client, label="Left")
        files = {"archive": ("many.zip", many_notes_zip(200), "application/zip")}
        async with client.stream("POST", "/workspace/import", data=form, files=files) as reply:
            async for chunk in reply.aiter_text():
                if "import: 200 files found" in chunk:
                    break  # the owner closes the tab after the first progress line
        left.set()
        with anyio.fail_after(60):
            while "workspace.import" not in [e.kind for e in site.store.audit_log.events(owner_id=owner.id)]:
                await anyio.sleep(0.05)  # a poll interval on the condition above
        assert len(list((folder / "notes" / "Imported" / "Left").rglob("*.md"))) == 200
        page = await client.get("/workspace")
        assert '<th scope="row">Notes</th><td>200</td>' in page.text


@pytest.mark.req("life:import")
def test_the_browser_shows_a_large_import_progress_before_it_finishes(
    page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    async def released() -> None:
        await anyio.to_thread.run_sync(release.wait)

    hold_the_reply(monkeypatch, released)
    upload = tmp_path / "many.zip"
    upload.write_bytes(many_notes_zip(900))
    with site_in_thread(tmp_path / "data") as site:
        page.goto(site.url + "/signup")
        page.get_by_label("Email").fill(EMAIL)
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Password again").fill(PASSWORD)
        page.get_by_role("button", name="Create account").click()
        page.wait_for_url(site.url + "/")
        page.get_by_role("link", name="Workspace").click()
        page.get_by_label("Label").fill("Many")
        page.get_by_label("A .zip file").set_input_files(upload)
        page.get_by_role("button", name="Import").click()
        progress = page.get_by_role("log", name="Import progress")
        try:
            expect(progress).to_contain_text("import: copied 900 of 900 files", timeout=120_000)
            # the engine's reply is still held: the page shows progress and no summary yet
            assert "import: 900 files found in the upload" in progress.inner_text()
            assert page.get_by_role("status").count() == 0
        finally:
            release.set()
        expect(page.get_by_role("status")).to_have_text("Imported 900, skipped 0.", timeout=120_000)
        assert_accessible(page)
        assert "import: indexed; searchable" in progress.inner_text()
