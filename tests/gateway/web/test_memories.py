"""``/memories`` (the Memories page): the owner browses, searches, views, retires and
restores what agents remember — over HTTP and in a real browser."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx
import pytest
from playwright.sync_api import Page

from gateway import layout
from tests.gateway.e2e import Gateway
from tests.gateway.web.conftest import Site, csrf_of, running_site
from tests.gateway.web.test_account import sign_up
from tests.gateway.web.test_pages import PASSWORD, assert_accessible

pytestmark = pytest.mark.req("life:retire")


def rest(url: str, token: str, path: str, body: dict[str, object]) -> dict[str, object]:
    r = httpx.post(
        url + "/api/v1" + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert r.status_code == 200, r.text
    result: dict[str, object] = r.json()
    return result


def token_for(site: Site, email: str) -> str:
    owner = site.store.owners.by_email(email)
    workspace = site.store.owners.workspaces(owner.id)[0]
    _, secret = site.store.connections.create_pat(owner.id, workspace.id, "Claude Code on laptop")
    return secret


@pytest.mark.anyio
async def test_browse_search_view_retire_restore_over_http(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        assert (await client.get("/memories")).headers["location"] == "/login?next=%2Fmemories"
        await sign_up(client, "ada@example.com")
        token = token_for(site, "ada@example.com")
        note = await anyio.to_thread.run_sync(
            lambda: rest(site.url, token, "/memories", {"statement": "The standup moved to 9:30."})
        )
        for value in ("MySQL", "Postgres"):
            fact: dict[str, object] = {"subject": "Fjord", "predicate": "database", "object": value}
            await anyio.to_thread.run_sync(rest, site.url, token, "/facts", fact)

        listing = await client.get("/memories")
        assert listing.status_code == 200 and "2 memories" in listing.text
        assert "The standup moved to 9:30." in listing.text and "Fjord · database: Postgres" in listing.text
        assert "Claude Code on laptop" in listing.text
        found = await client.get("/memories", params={"q": "standup"})
        assert "1 memory" in found.text and "Postgres" not in found.text
        bad = await client.get("/memories", params={"since": "last week"})
        assert bad.status_code == 400 and "since must be a date, YYYY-MM-DD" in bad.text

        fact_id = re.search(r'href="/memories/(fct_[^?"]+)', listing.text)
        assert fact_id is not None
        history = await client.get(f"/memories/{fact_id.group(1)}")
        assert history.status_code == 200
        assert history.text.index("MySQL") < history.text.index("Postgres")  # oldest first

        view = await client.get(f"/memories/{note['id']}")
        assert view.status_code == 200 and "The standup moved to 9:30." in view.text
        form = {"csrf_token": csrf_of(view.text), "workspace": "default", "reason": "moved again"}
        retired = await client.post(f"/memories/{note['id']}/retire", data=form)
        assert retired.status_code == 303
        after = await client.get(retired.headers["location"])
        assert "Retired: agents no longer see it." in after.text and "Restore" in after.text
        only_retired = await client.get("/memories", params={"state": "retired"})
        assert "1 memory" in only_retired.text and "The standup moved" in only_retired.text
        restored = await client.post(f"/memories/{note['id']}/restore", data={**form})
        assert "Restored exactly as it was." in (await client.get(restored.headers["location"])).text


@pytest.mark.anyio
@pytest.mark.req("life:archive")
async def test_a_note_moved_into_archive_by_hand_shows_its_banner(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "ada@example.com")
        token = token_for(site, "ada@example.com")
        note = await anyio.to_thread.run_sync(
            lambda: rest(site.url, token, "/memories", {"statement": "The kiln room key is in the red box."})
        )
        owner = site.store.owners.by_email("ada@example.com")
        folder = layout.workspace_dir(data_dir, site.store.owners.workspaces(owner.id)[0].id)
        (path,) = (folder / "notes").rglob(f"{note['id']}.md")
        target = folder / "archive" / path.relative_to(folder / "notes")
        target.parent.mkdir(parents=True)
        path.rename(target)  # by hand: no banner in the file
        with anyio.fail_after(60):  # the engine notices hand edits within seconds
            while "1 memory" not in (await client.get("/memories", params={"state": "archived"})).text:
                await anyio.sleep(0.2)
        view = await client.get(f"/memories/{note['id']}")
        assert view.status_code == 200 and "From cold storage — this was true at one time" in view.text
        assert "The kiln room key is in the red box." in view.text
        assert b"From cold storage" not in target.read_bytes()  # the owner's file as it was


@pytest.mark.anyio
@pytest.mark.req("sec:authz", "gw:isolation")
async def test_no_csrf_no_change_and_no_other_owners_memory(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as ada, site.client() as bob:
        await sign_up(ada, "ada@example.com")
        await sign_up(bob, "bob@example.com")
        token = token_for(site, "ada@example.com")
        note = await anyio.to_thread.run_sync(
            lambda: rest(site.url, token, "/memories", {"statement": "Ada's plan."})
        )
        forged = await ada.post(f"/memories/{note['id']}/retire", data={"csrf_token": "forged"})
        assert forged.status_code == 403
        assert "live" in (await ada.get(f"/memories/{note['id']}")).text
        other = await bob.get(f"/memories/{note['id']}")
        assert other.status_code == 404 and "Ada's plan." not in other.text
        assert "Ada's plan." not in (await bob.get("/memories")).text
        view = await bob.get("/memories")
        attempt = await bob.post(f"/memories/{note['id']}/retire", data={"csrf_token": csrf_of(view.text)})
        assert attempt.status_code == 400
        assert "live" in (await ada.get(f"/memories/{note['id']}")).text


def test_find_retire_and_restore_in_a_real_browser(site: Gateway, page: Page) -> None:
    page.goto(site.url + "/signup")
    page.get_by_label("Email").fill("cy@example.com")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url(site.url + "/")
    token = site.token("cy@example.com", "Cursor")
    rest(site.url, token, "/memories", {"statement": "Deploys happen on Fridays after the review."})
    page.get_by_role("link", name="Memories").click()
    assert_accessible(page)
    page.get_by_label("Words or an id").fill("fridays")
    page.get_by_role("button", name="Search").click()
    page.get_by_role("link", name=re.compile("Deploys happen on Fridays")).click()
    assert_accessible(page)
    page.get_by_label("Why retire it? (optional)").fill("policy changed")
    page.get_by_role("button", name="Retire").click()
    assert page.get_by_role("status").inner_text().startswith("Retired")
    page.get_by_role("button", name="Restore").click()
    assert page.get_by_role("status").inner_text().startswith("Restored")


@pytest.mark.anyio
@pytest.mark.req("life:delete")
async def test_delete_a_retired_memory_permanently_over_http(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "ada@example.com")
        token = token_for(site, "ada@example.com")
        note = await anyio.to_thread.run_sync(
            lambda: rest(site.url, token, "/memories", {"statement": "The vault code is 4-Ocelot-7."})
        )
        for value in ("MySQL", "Postgres"):
            fact_body: dict[str, object] = {"subject": "Fjord", "predicate": "database", "object": value}
            fact = await anyio.to_thread.run_sync(rest, site.url, token, "/facts", fact_body)

        live = await client.get(f"/memories/{note['id']}/delete")
        assert live.status_code == 409 and "Retire it first." in live.text
        assert 'name="confirm"' not in live.text  # no way to delete a live memory from here
        view = await client.get(f"/memories/{note['id']}")
        form = {"csrf_token": csrf_of(view.text), "workspace": "default"}
        refused = await client.post(f"/memories/{note['id']}/delete", data={**form, "confirm": "delete"})
        assert refused.status_code == 409 and "Retire it first." in refused.text
        for memory_id in (note["id"], fact["id"]):
            assert (await client.post(f"/memories/{memory_id}/retire", data=form)).status_code == 303

        page = await client.get(f"/memories/{note['id']}/delete")
        assert page.status_code == 200 and "4-Ocelot-7" in page.text and 'name="confirm"' in page.text
        forged = await client.post(f"/memories/{note['id']}/delete", data={"confirm": "delete"})
        assert forged.status_code == 403
        untyped = await client.post(f"/memories/{note['id']}/delete", data={**form, "confirm": "yes"})
        assert untyped.status_code == 400 and "Type delete in the box to confirm" in untyped.text
        assert "retired" in (await client.get(f"/memories/{note['id']}")).text

        deleted = await client.post(f"/memories/{note['id']}/delete", data={**form, "confirm": "delete"})
        assert deleted.status_code == 303
        after = await client.get(deleted.headers["location"])
        assert "Deleted permanently." in after.text and "<em>deleted</em>" in after.text
        assert "4-Ocelot-7" not in after.text and "Dashboard" in after.text
        again = await client.post(f"/memories/{note['id']}/delete", data={**form, "confirm": "delete"})
        assert again.status_code == 404 and "already deleted permanently" in again.text

        gone = await client.post(f"/memories/{fact['id']}/delete", data={**form, "confirm": "DELETE"})
        history = await client.get(gone.headers["location"])
        assert "<em>deleted</em>" in history.text and "MySQL" not in history.text
        assert "Postgres" not in history.text
        listing = await client.get("/memories", params={"state": "deleted"})
        assert "2 memories" in listing.text and "4-Ocelot-7" not in listing.text
        assert "Ocelot" not in (await client.get("/memories")).text

        r = await anyio.to_thread.run_sync(
            lambda: httpx.get(
                f"{site.url}/api/v1/memories/{note['id']}", headers={"Authorization": f"Bearer {token}"}
            )
        )
        assert r.status_code == 404
        owner = site.store.owners.by_email("ada@example.com")
        audits = [a for a in site.store.audit_log.events(owner_id=owner.id) if a.kind == "memory.delete"]
        assert sorted(str(a.detail["id"]) for a in audits) == sorted([str(note["id"]), str(fact["id"])])
        assert all(a.detail["by"] == "Dashboard" and a.workspace_id for a in audits)
        assert "Ocelot" not in repr(audits) and "Postgres" not in repr(audits)


@pytest.mark.anyio
@pytest.mark.req("life:delete", "gw:isolation")
async def test_no_one_else_can_delete(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as ada, site.client() as bob:
        await sign_up(ada, "ada@example.com")
        await sign_up(bob, "bob@example.com")
        token = token_for(site, "ada@example.com")
        note = await anyio.to_thread.run_sync(
            lambda: rest(site.url, token, "/memories", {"statement": "Ada's."})
        )
        view = await ada.get(f"/memories/{note['id']}")
        form = {"csrf_token": csrf_of(view.text), "workspace": "default"}
        assert (await ada.post(f"/memories/{note['id']}/retire", data=form)).status_code == 303
        bobs = {"csrf_token": csrf_of((await bob.get("/memories")).text), "confirm": "delete"}
        attempt = await bob.post(f"/memories/{note['id']}/delete", data=bobs)
        assert attempt.status_code == 404
        assert (await bob.get(f"/memories/{note['id']}/delete")).status_code == 404
        assert "retired" in (await ada.get(f"/memories/{note['id']}")).text
        signed_out = httpx.AsyncClient(base_url=site.url, headers={"Accept": "text/html"})
        async with signed_out:
            nobody = await signed_out.post(f"/memories/{note['id']}/delete", data=form)
            assert nobody.status_code in (303, 403)
        assert "retired" in (await ada.get(f"/memories/{note['id']}")).text


@pytest.mark.req("life:delete")
def test_find_retire_restore_and_delete_in_a_real_browser(site: Gateway, page: Page) -> None:
    page.goto(site.url + "/signup")
    page.get_by_label("Email").fill("dee@example.com")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url(site.url + "/")
    token = site.token("dee@example.com", "Cursor")
    rest(site.url, token, "/memories", {"statement": "The wifi password is Tangerine-Lighthouse-42."})
    rest(site.url, token, "/memories", {"statement": "The office opens at eight."})
    page.get_by_role("link", name="Memories").click()
    page.get_by_label("Words or an id").fill("tangerine")
    page.get_by_role("button", name="Search").click()
    assert page.get_by_role("heading", name="1 memory").is_visible()
    page.get_by_role("link", name=re.compile("Tangerine-Lighthouse")).click()
    page.get_by_role("button", name="Retire").click()
    assert page.get_by_role("status").inner_text().startswith("Retired")
    page.get_by_role("button", name="Restore").click()
    assert page.get_by_role("status").inner_text().startswith("Restored")
    page.get_by_role("button", name="Retire").click()
    page.get_by_role("link", name="Delete permanently…").click()
    assert_accessible(page)
    page.get_by_role("button", name="Delete permanently").click()  # the box is required: nothing sent
    assert page.get_by_role("heading", name="Delete permanently", exact=True).is_visible()
    page.get_by_label("Type delete to confirm").fill("delete")
    page.get_by_role("button", name="Delete permanently").click()
    assert page.get_by_role("status").inner_text() == "Deleted permanently."
    history = page.get_by_role("table")
    assert history.get_by_role("cell", name="deleted").is_visible() and "Tangerine" not in page.content()
    page.get_by_role("link", name="← All memories").click()
    page.get_by_label("Words or an id").fill("tangerine")
    page.get_by_role("button", name="Search").click()
    assert page.get_by_role("heading", name="0 memories").is_visible()
    page.get_by_label("State").select_option("deleted")
    page.get_by_label("Words or an id").fill("")
    page.get_by_role("button", name="Search").click()
    assert page.get_by_role("heading", name="1 memory").is_visible()
    assert "Tangerine" not in page.content() and "eight" not in page.content()
