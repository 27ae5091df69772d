"""``/settings`` over real HTTP with real engines, and in a real headless Chromium: every setting
with its badge, refusals field by field that change nothing, a change that the restarted engine
really runs with (seen through the real MCP client), and Clear."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Page

from gateway.web.workspace_settings import changes, provider_label, shown
from tests.gateway.e2e import Gateway, connect, data, refusal
from tests.gateway.web.browser import off_loop
from tests.gateway.web.conftest import Site, csrf_of, running_site
from tests.gateway.web.test_account import PASSWORD, sign_up
from tests.gateway.web.test_pages import assert_accessible


def test_the_provider_is_named_as_the_setting_names_it() -> None:
    """The host's shared embedder service computes the local model: the page says local, as the
    embedding_provider setting does, not the engine's internal name for the service."""
    assert provider_label("remote") == "local"
    assert [provider_label(p) for p in ("local", "vertex", "off")] == ["local", "vertex", "off"]


def test_shown_and_changes_compare_what_the_page_showed() -> None:
    assert [shown(v) for v in (None, True, False, 60.0, 0.5, 800, "local")] == [
        "",
        "true",
        "false",
        "60",
        "0.5",
        "800",
        "local",
    ]
    fields: list[dict[str, Any]] = [
        {"name": "half_life_days", "saved": 60.0},
        {"name": "vertex_project", "saved": None},
        {"name": "log_queries", "saved": False},
    ]
    form = {"half_life_days": "60", "vertex_project": "", "log_queries": "true", "csrf_token": "x"}
    assert changes(fields, form) == {"log_queries": "true"}
    assert changes(fields, {"half_life_days": " 61 "}) == {"half_life_days": "61"}
    operators: list[dict[str, Any]] = [{"name": "vertex_base_url", "saved": None, "instance_only": True}]
    assert changes(operators, {"vertex_base_url": "http://127.0.0.1:9/"}) == {}  # never sent on


def _badge(html: str, name: str) -> str:
    found = re.search(r"<code>" + name + r'</code></label>\s*<span class="badge[^"]*">([^<]+)</span>', html)
    assert found is not None, f"no badge for {name}"
    return found.group(1)


def _value(html: str, name: str) -> str:
    found = re.search(r'id="f-' + name + r'" name="' + name + r'" type="text" value="([^"]*)"', html)
    assert found is not None, f"no text input for {name}"
    return found.group(1)


async def _status(site: Site, token: str) -> dict[str, Any]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(site.url + "/mcp", http_client=http)) as client:
        status = data(await client.call_tool("memory_status", {}))
        too_small = refusal(await client.call_tool("get_context", {"query": "x", "max_tokens": 50}))
    return {"settings": status["settings"], "origin": status["settings_origin"], "refusal": too_small}


@pytest.mark.anyio
@pytest.mark.req("settings:layers", "settings:strict", "gw:signin")
async def test_change_refuse_and_clear_a_setting_which_the_engine_then_runs_with(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        assert (await client.get("/settings")).headers["location"] == "/login?next=%2Fsettings"
        await sign_up(client, "ana@example.com")
        owner = site.store.owners.by_email("ana@example.com")
        workspace = site.store.owners.workspaces(owner.id)[0]
        _, token = site.store.connections.create_pat(owner.id, workspace.id, "Agent")
        page = await client.get("/settings")
        assert page.status_code == 200
        for name in ("half_life_days", "max_tokens_default", "embedding_provider", "log_queries"):
            assert _badge(page.text, name) == "Instance default"
        assert "Embedding provider" in page.text and _value(page.text, "max_tokens_default") == "800"
        for name in ("vertex_base_url", "vertex_project", "vertex_location", "vertex_offered"):
            assert f'name="{name}"' not in page.text  # the operator's: shown, not offered for change
        assert '<option value="vertex"' not in page.text  # not set up by the operator here
        form = {"csrf_token": csrf_of(page.text), "workspace": "default"}

        # field by field: both bad fields are named, the good one is not saved either
        typed = {"max_tokens_default": "50", "half_life_days": "soon", "notes_limit": "5"}
        refused = await client.post("/settings", data={**form, **typed})
        assert refused.status_code == 400
        assert "Nothing was saved" in refused.text
        assert "max_tokens_default 50 is out of range: use 100 to 4000" in refused.text
        assert "half_life_days must be a number, not &#39;soon&#39;" in refused.text
        assert 'aria-invalid="true"' in refused.text and _value(refused.text, "half_life_days") == "soon"
        settings_file = data_dir / "workspaces" / workspace.id / "settings.json"
        assert not settings_file.exists()
        assert site.store.audit_log.events(owner_id=owner.id, limit=1)[0].kind != "settings.change"

        # a change: saved in the workspace, the engine restarted, and it runs with it
        before = await _status(site, token)
        assert before["settings"]["max_tokens_default"] == 800
        saved = await client.post("/settings", data={**form, "max_tokens_default": "300"})
        assert saved.status_code == 303
        page = await client.get(saved.headers["location"])
        assert "The workspace&#39;s engine restarted" in page.text
        assert _badge(page.text, "max_tokens_default") == "Workspace override"
        assert _value(page.text, "max_tokens_default") == "300"
        assert _badge(page.text, "half_life_days") == "Instance default"
        after = await _status(site, token)
        assert after["settings"]["max_tokens_default"] == 300
        assert after["origin"]["max_tokens_default"] == "workspace"
        assert "(default 300)" in after["refusal"] and "(default 800)" in before["refusal"]
        event = site.store.audit_log.events(owner_id=owner.id, limit=1)[0]
        assert event.kind == "settings.change" and event.detail == {
            "set": ["max_tokens_default"],
            "clear": [],
        }

        # Clear: back to the instance default, again in effect
        page_form = {"csrf_token": csrf_of(page.text), "workspace": "default"}
        cleared = await client.post("/settings", data={**page_form, "clear": "max_tokens_default"})
        assert cleared.status_code == 303
        page = await client.get(cleared.headers["location"])
        assert "Cleared max_tokens_default" in page.text
        assert _badge(page.text, "max_tokens_default") == "Instance default"
        assert (await _status(site, token))["origin"]["max_tokens_default"] == "default"
        # nothing changed is said so; another owner's workspace is not reachable
        same = await client.post("/settings", data={**page_form, "max_tokens_default": "800"})
        assert same.status_code == 200 and "Nothing changed." in same.text
        other = await client.post("/settings", data={**page_form, "workspace": "nope"})
        assert other.status_code == 404


@pytest.mark.anyio
@pytest.mark.req("gw:signin", "sec:authz")
async def test_saving_settings_needs_the_csrf_token(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, "bo@example.com")
        owner = site.store.owners.by_email("bo@example.com")
        workspace = site.store.owners.workspaces(owner.id)[0]
        for token in (None, "forged"):
            form = {"workspace": "default", "notes_limit": "3"} | (
                {} if token is None else {"csrf_token": token}
            )
            assert (await client.post("/settings", data=form)).status_code == 403
        assert not (data_dir / "workspaces" / workspace.id / "settings.json").exists()


@pytest.mark.req("settings:layers", "gw:signin")
def test_change_a_setting_and_clear_it_in_a_real_browser(site: Gateway, page: Page) -> None:
    site.cli("owner", "create", "cy@example.com", stdin=PASSWORD + "\n")
    token = site.token("cy@example.com", "Agent")
    page.goto(site.url + "/login")
    page.get_by_label("Email").fill("cy@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/")
    page.get_by_role("navigation", name="Account").get_by_role("link", name="Settings").click()
    page.wait_for_url(site.url + "/settings")
    assert_accessible(page)
    assert page.get_by_role("heading", name="Embedding provider").is_visible()

    # a bad value: announced, marked on its field, nothing saved
    page.get_by_label("half_life_days").fill("0")
    page.get_by_role("button", name="Save changes").click()
    assert "Nothing was saved" in page.get_by_role("alert").first.inner_text()
    assert page.get_by_label("half_life_days").get_attribute("aria-invalid") == "true"
    assert "out of range: use 1 to 3650" in page.locator("#e-half_life_days").inner_text()

    page.get_by_label("half_life_days").fill("60")
    page.get_by_label("notes_limit").fill("7")
    page.get_by_label("notes_limit").press("Enter")  # Enter saves (the Clear buttons are other forms)
    page.wait_for_url(site.url + "/settings?workspace=default&saved=1")
    assert_accessible(page)
    assert page.get_by_role("status").inner_text().startswith("Saved.")
    row = page.locator(".setting", has=page.get_by_label("notes_limit"))
    assert "Workspace override" in row.inner_text() and "Instance default: 20" in row.inner_text()

    async def notes_limit() -> tuple[int, str]:
        async with connect(site, token) as client:
            status = data(await client.call_tool("memory_status", {}))
        return status["settings"]["notes_limit"], status["settings_origin"]["notes_limit"]

    assert off_loop(notes_limit) == (7, "workspace")
    page.get_by_role("button", name="Clear notes_limit").click()
    page.wait_for_url(site.url + "/settings?workspace=default&cleared=notes_limit")
    row = page.locator(".setting", has=page.get_by_label("notes_limit"))
    assert "Instance default" in row.inner_text() and page.get_by_label("notes_limit").input_value() == "20"
    assert page.get_by_role("button", name="Clear notes_limit").count() == 0
    assert off_loop(notes_limit) == (20, "default")
