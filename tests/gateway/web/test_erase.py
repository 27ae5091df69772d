"""The Account page and erasing an account (SPEC §11 Account, §5 ``life:delete``: "account erasure is
self-serve and removes everything"), over real HTTP with real engines, and in headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from playwright.sync_api import Page

from gateway import layout
from gateway.errors import OwnerNotFound
from tests.engine.support import socket_engine
from tests.gateway.e2e import Gateway
from tests.gateway.web.conftest import Site, csrf_of, running_site
from tests.gateway.web.test_account import sign_in, sign_up
from tests.gateway.web.test_pages import PASSWORD, assert_accessible

EMAIL = "erin@example.com"


async def make_token(client: httpx.AsyncClient, name: str, workspace: str = "default") -> str:
    page = await client.get("/tokens/new")
    form = {"csrf_token": csrf_of(page.text), "name": name, "workspace": workspace}
    created = await client.post("/tokens/new", data=form)
    assert created.status_code == 201, created.text
    found = re.search(r'id="token" type="text" readonly value="([^"]+)"', created.text)
    assert found is not None
    return found.group(1)


async def remember(site: Site, token: str, statement: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=site.url, timeout=60) as api:
        return await api.post(
            "/api/v1/memories", json={"statement": statement}, headers={"Authorization": f"Bearer {token}"}
        )


@pytest.mark.anyio
@pytest.mark.req("life:delete", "gw:signin", "gw:ops")
async def test_erasing_an_account_deletes_its_workspaces_tokens_and_sessions(data_dir: Path) -> None:
    async with running_site(data_dir) as site, site.client() as client, site.client() as other_tab:
        await sign_up(client, EMAIL)
        await sign_in(other_tab, EMAIL)
        owner = site.store.owners.by_email(EMAIL)
        second = site.store.owners.create_workspace(owner.id, "work")
        token = await make_token(client, "Laptop")
        work_token = await make_token(client, "Work laptop", "work")
        for t, text in (
            (token, "Erin's dentist is Dr Alvarez"),
            (work_token, "The fjord project ships in May"),
        ):
            saved = await remember(site, t, text)
            assert saved.status_code == 200, saved.text
        folders = [layout.workspace_dir(data_dir, w.id) for w in site.store.owners.workspaces(owner.id)]
        assert all(any(f.rglob("*.md")) for f in folders)

        page = await client.get("/account")
        assert page.status_code == 200 and EMAIL in page.text and "<code>work</code>" in page.text

        # a wrong confirmation erases nothing and says what to type
        refused = await client.post(
            "/account/erase", data={"csrf_token": csrf_of(page.text), "confirm": "yes"}
        )
        assert refused.status_code == 400 and f"type its email, {EMAIL}, exactly" in refused.text
        # without the session's CSRF token: refused too
        forged = await client.post("/account/erase", data={"csrf_token": "forged", "confirm": EMAIL})
        assert forged.status_code == 403
        assert (await remember(site, token, "still works")).status_code == 200
        assert site.store.owners.by_email(EMAIL).id == owner.id

        erased = await client.post(
            "/account/erase", data={"csrf_token": csrf_of(page.text), "confirm": EMAIL.upper()}
        )
        assert erased.status_code == 303 and erased.headers["location"] == "/login?erased=1"
        login = await client.get("/login?erased=1")
        assert "Your account and all its workspaces were erased." in login.text

        # the data is gone: folders, engine logs, rows
        assert not any(f.exists() for f in folders)
        assert not layout.log_file(data_dir, second.id).exists()
        assert site.store.owners.workspaces(owner.id) == []
        assert site.store.connections.of_owner(owner.id, include_revoked=True) == []
        # the old tokens and every session no longer work
        for t in (token, work_token):
            assert site.store.connections.authenticate(t) is None
            refused_call = await remember(site, t, "after erasure")
            assert refused_call.status_code == 401
        assert (await client.get("/account")).status_code == 303
        assert (await other_tab.get("/")).status_code == 303
        assert not any(f.exists() for f in folders)  # nothing started an engine again
        # one audit event remains, without personal content
        events = site.store.audit_log.events(owner_id=owner.id)
        assert events[0].kind == "account.erase"
        assert events[0].detail["workspaces"] == 2 and events[0].detail["connections"] == 2
        dumped = json.dumps([e.detail for e in events]) + "".join(str(e.remote) for e in events)
        assert EMAIL not in dumped and "Laptop" not in dumped and "127.0.0.1" not in dumped
        # the email is free again: a new account starts empty
        await sign_up(client, EMAIL)
        again = site.store.owners.by_email(EMAIL)
        assert again.id != owner.id and site.store.connections.of_owner(again.id) == []


@pytest.mark.req("life:delete", "gw:signin")
def test_erase_a_test_account_in_the_browser(site: Gateway, page: Page) -> None:
    site.cli("owner", "create", EMAIL, stdin=PASSWORD + "\n")
    page.goto(site.url + "/login")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/")
    page.goto(site.url + "/account")
    assert_accessible(page)
    page.get_by_label("Type your email to confirm").fill("not me")
    page.get_by_role("button", name="Erase account and all workspaces").click()
    assert "Nothing was erased" in page.get_by_role("alert").inner_text()
    page.get_by_label("Type your email to confirm").fill(EMAIL)
    page.get_by_role("button", name="Erase account and all workspaces").click()
    page.wait_for_url(site.url + "/login?erased=1")
    assert page.get_by_role("status").inner_text() == "Your account and all its workspaces were erased."
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    assert "do not match an account" in page.get_by_role("alert").inner_text()


def almanac_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "almanac"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.anyio
@pytest.mark.req("life:delete", "run:cli")
async def test_an_erase_that_could_not_delete_a_folder_is_finished_by_the_operator(
    data_dir: Path, tmp_path: Path
) -> None:
    async with running_site(data_dir) as site, site.client() as client:
        await sign_up(client, EMAIL)
        owner = site.store.owners.by_email(EMAIL)
        (workspace,) = site.store.owners.workspaces(owner.id)
        token = await make_token(client, "Laptop")
        folder = layout.workspace_dir(data_dir, workspace.id)
        page = await client.get("/account")
        # an engine the gateway does not manage still serves the folder (it holds .almanac.lock):
        # the folder must not be pulled from under it, so the erase cannot finish
        with socket_engine(folder, tmp_path / "stray.sock"):
            erased = await client.post(
                "/account/erase", data={"csrf_token": csrf_of(page.text), "confirm": EMAIL}
            )
            assert erased.status_code == 303 and erased.headers["location"] == "/login?erased=partly"
            assert folder.is_dir()
            failed = site.store.audit_log.events(owner_id=owner.id)[0]
            assert failed.kind == "account.erase.failed" and failed.workspace_id == workspace.id
            # locked out meanwhile: the token and the sign-in no longer work
            assert site.store.connections.authenticate(token) is None
            assert (await remember(site, token, "after the erase")).status_code == 401
            with pytest.raises(OwnerNotFound):
                site.store.owners.by_email(EMAIL)
            # finishing while the engine still serves it is refused, and changes nothing
            early = await anyio.to_thread.run_sync(
                lambda: almanac_cli("owner", "erase", EMAIL, "--finish", "--data-dir", str(data_dir))
            )
            assert early.returncode == 1 and "still locked out" in early.stderr
            assert folder.is_dir() and site.store.owners.workspaces(owner.id) == [workspace]

        # the cause is gone (the stray engine stopped): the operator finishes the erase
        done = await anyio.to_thread.run_sync(
            lambda: almanac_cli("owner", "erase", EMAIL, "--finish", "--data-dir", str(data_dir))
        )
        assert done.returncode == 0, done.stderr
        assert f"erased the account {owner.id}" in done.stderr
        assert not folder.exists() and not layout.log_file(data_dir, workspace.id).exists()
        assert site.store.owners.workspaces(owner.id) == []
        assert site.store.connections.of_owner(owner.id, include_revoked=True) == []
        kinds = [e.kind for e in site.store.audit_log.events(owner_id=owner.id)]
        assert kinds[:2] == ["account.erase", "account.erase.finish"]
        # nothing is left to finish: a second run says so and changes nothing
        again = await anyio.to_thread.run_sync(
            lambda: almanac_cli("owner", "erase", EMAIL, "--finish", "--data-dir", str(data_dir))
        )
        assert again.returncode == 1 and "no account being erased" in again.stderr
