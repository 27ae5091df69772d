"""The server-rendered pages in node mode (``run:scale-out``: "any gateway accepts any
request"): a real PostgreSQL control plane and two real ``almanac serve`` nodes on loopback. An
owner whose browser reached node B works with a workspace placed on node C: the page is rendered on
B (session and CSRF checked there), each engine call goes to C, signed (never the browser's cookie),
and C's engine serves it; B starts no engine and keeps no copy. C killed → the pages answer 503 +
Retry-After, and nothing is opened or written on B."""

from __future__ import annotations

import io
import json
import re
import signal
import time
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from gateway.auth.passwords import hash_password
from gateway.cluster import signing
from gateway.cluster.remote import INTERNAL_ENGINE_CONTROL, INTERNAL_ENGINE_PREFIX
from gateway.control.clock import epoch
from gateway.control.records import Principal
from gateway.control.store import ControlPlane
from tests.gateway.cluster.nodes import SECRET, Cluster, started_nodes
from tests.gateway.e2e import Gateway, files_containing, wait_for
from tests.gateway.web.browser import launch
from tests.gateway.web.conftest import csrf_of
from tests.gateway.web.test_account import sign_in
from tests.gateway.web.test_pages import PASSWORD
from tests.gateway.web.test_workspace_settings import _value

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.req("run:scale-out")]

EMAIL = "pia@example.com"


class Pair(Cluster):
    """Two nodes (B, where owners sign in; C, holding their workspaces) and the control plane."""

    def store(self) -> ControlPlane:
        return ControlPlane.connect(self.url, self.root / "unused.db")

    def owner_on_c(self, email: str) -> tuple[str, str]:
        """An owner (password :data:`PASSWORD`) whose workspace is placed on node C before any
        call; returns its workspace id and an API token."""
        store = self.store()
        try:
            owner, workspace = store.owners.create(email, hash_password(PASSWORD))
            store.nodes.place_on(workspace.id, "node-c", now=time.time(), lease=2.0)
            _, token = store.connections.create_pat(owner.id, workspace.id, "Agent")
        finally:
            store.close()
        return workspace.id, token


pair = started_nodes("pair", "pair", ("node-b", "node-c"), Pair)


@pytest.fixture(scope="module")
def pia(pair: Pair) -> tuple[str, str]:
    return pair.owner_on_c(EMAIL)


@pytest.fixture
async def browser(pair: Pair) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like client on node B (keeps cookies, follows no redirect), signed in as Pia."""
    b = pair.nodes["node-b"]
    async with httpx.AsyncClient(base_url=b.url, timeout=60, headers={"Accept": "text/html"}) as client:
        signed_in = await sign_in(client, EMAIL)
        assert signed_in.status_code == 303, signed_in.text
        yield client


def api(
    node: Gateway, token: str, method: str, path: str, body: dict[str, str] | None = None
) -> dict[str, Any]:
    r = httpx.request(
        method,
        node.url + "/api/v1" + path,
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def assert_nothing_on_b(pair: Pair, workspace: str) -> None:
    b = pair.nodes["node-b"]
    assert not (b.data_dir / "workspaces" / workspace).exists()
    assert not any(p.name == workspace for p in b.engines())


async def test_an_owner_on_node_b_works_with_a_workspace_placed_on_node_c(
    pair: Pair, pia: tuple[str, str], browser: httpx.AsyncClient
) -> None:
    workspace, token = pia
    c = pair.nodes["node-c"]
    folder = c.data_dir / "workspaces" / workspace
    note = api(c, token, "POST", "/memories", {"statement": "The kiln is fired on Thursdays."})
    api(c, token, "POST", "/memories", {"statement": "Glaze orders go to Oskar."})

    # see and search
    listing = await browser.get("/memories")
    assert listing.status_code == 200, listing.text
    assert "2 memories" in listing.text and "The kiln is fired on Thursdays." in listing.text
    found = await browser.get("/memories", params={"q": "kiln"})
    assert "1 memory" in found.text and "Oskar" not in found.text

    # view, retire, restore (the engine's own tools, as the owner's dashboard)
    view = await browser.get(f"/memories/{note['id']}")
    assert view.status_code == 200 and "The kiln is fired on Thursdays." in view.text
    form = {"csrf_token": csrf_of(view.text), "workspace": "default", "reason": "the kiln moved"}
    retired = await browser.post(f"/memories/{note['id']}/retire", data=form)
    assert retired.status_code == 303, retired.text
    assert "Retired: agents no longer see it." in (await browser.get(retired.headers["location"])).text
    assert "1 memory" in (await browser.get("/memories", params={"state": "retired"})).text
    assert "the kiln moved" in "".join(p.read_text() for p in folder.rglob("*.md"))  # written on C
    restored = await browser.post(f"/memories/{note['id']}/restore", data=form)
    assert "Restored exactly as it was." in (await browser.get(restored.headers["location"])).text

    # a setting: saved in C's copy of the workspace, and C's engine restarted to run with it
    settings = await browser.get("/settings")
    assert settings.status_code == 200, settings.text
    saved = await browser.post(
        "/settings",
        data={"csrf_token": csrf_of(settings.text), "workspace": "default", "max_tokens_default": "300"},
    )
    assert saved.status_code == 303, saved.text
    after = await browser.get(saved.headers["location"])
    assert "The workspace&#39;s engine restarted" in after.text
    assert json.loads((folder / "settings.json").read_text())["max_tokens_default"] == 300
    assert _value(after.text, "max_tokens_default") == "300"

    # import a small folder (picked files): its progress and summary stream back from C's engine
    page = await browser.get("/workspace")
    assert page.status_code == 200 and "Markdown store" in page.text
    picked = [
        ("files", ("studio/Suppliers/Clay.md", b"Clay comes from Westerwald.\n", "text/markdown")),
        ("files", ("studio/Kiln.md", b"# Kiln\nCone 6, fired slowly.\n", "text/markdown")),
    ]
    done = await browser.post(
        "/workspace/import",
        data={"csrf_token": csrf_of(page.text), "workspace": "default", "label": "Studio"},
        files=picked,
    )
    assert done.status_code == 200, done.text
    assert "2 notes imported" in done.text and "notes/Imported/Studio/" in done.text
    imported = folder / "notes" / "Imported" / "Studio"
    assert (imported / "Suppliers" / "Clay.md").read_text() == "Clay comes from Westerwald.\n"

    # export: C's zip streamed through B, with the imported note in it
    export = await browser.get("/workspace/export")
    assert export.status_code == 200, export.text
    assert "attachment" in export.headers["content-disposition"]
    names = zipfile.ZipFile(io.BytesIO(export.content)).namelist()
    assert any(n.endswith("Imported/Studio/Suppliers/Clay.md") for n in names), names

    # the Activity page reads C's retrieval log
    api(c, token, "POST", "/context", {"query": "when is the kiln fired?"})
    activity = await browser.get("/activity")
    assert activity.status_code == 200, activity.text
    assert f"/memories/{note['id']}" in activity.text

    kinds = [r[0] for r in pair.rows("SELECT kind FROM audit_events WHERE workspace_id = %s", workspace)]
    assert {"settings.change", "workspace.import", "workspace.export"} <= set(kinds)
    assert any(p.name == workspace for p in c.engines())
    assert_nothing_on_b(pair, workspace)


def test_the_memories_page_through_node_b_in_a_real_browser(
    pair: Pair, pia: tuple[str, str], tmp_path: Path
) -> None:
    """A smoke test in headless Chromium: sign in on node B, find and open a memory kept on C."""
    b = pair.nodes["node-b"]
    with sync_playwright() as playwright:
        context = launch(playwright, tmp_path / "chromium-profile")
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(b.url + "/login")
            page.get_by_label("Email").fill(EMAIL)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(b.url + "/")
            page.get_by_role("link", name="Memories").click()
            page.get_by_label("Words or an id").fill("kiln")
            page.get_by_role("button", name="Search").click()
            page.get_by_role("link", name=re.compile("The kiln is fired on Thursdays")).click()
            expect(page.get_by_role("button", name="Retire")).to_be_visible()
        finally:
            context.close()
    assert_nothing_on_b(pair, pia[0])


async def test_erasing_the_account_on_node_b_deletes_the_workspace_on_node_c(pair: Pair) -> None:
    email = "quinn@example.com"
    workspace, token = pair.owner_on_c(email)
    c = pair.nodes["node-c"]
    api(c, token, "POST", "/memories", {"statement": "Quinn's secret glaze recipe."})
    folder = c.data_dir / "workspaces" / workspace
    assert files_containing(folder, "secret glaze recipe")
    b = pair.nodes["node-b"]
    async with httpx.AsyncClient(base_url=b.url, timeout=60, headers={"Accept": "text/html"}) as client:
        assert (await sign_in(client, email)).status_code == 303
        account = await client.get("/account")
        erased = await client.post(
            "/account/erase", data={"csrf_token": csrf_of(account.text), "confirm": email}
        )
        assert erased.status_code == 303 and erased.headers["location"] == "/login?erased=1", erased.text
    assert not folder.exists()
    assert not any(p.name == workspace for p in c.engines())
    assert not pair.rows("SELECT id FROM owners WHERE email = %s", email)
    assert_nothing_on_b(pair, workspace)


async def test_an_erase_left_half_way_is_finished_from_any_node_by_the_workspace_s_node(pair: Pair) -> None:
    """``almanac owner erase --finish`` run on node B's data directory: the workspace on node C is
    erased by node C (its engine stopped, its folder deleted), then the rows go."""
    email = "ruth@example.com"
    workspace, token = pair.owner_on_c(email)
    b, c = pair.nodes["node-b"], pair.nodes["node-c"]
    api(c, token, "POST", "/memories", {"statement": "Ruth's kiln log."})
    assert any(p.name == workspace for p in c.engines())
    owner_id = str(pair.rows("SELECT id FROM owners WHERE email = %s", email)[0][0])
    store = pair.store()
    try:
        store.erasure.lock_out_owner(owner_id, remote=None)  # as an erase whose deletions did not happen
    finally:
        store.close()
    b.cli_env["ALMANAC_CLUSTER_SECRET"] = SECRET
    out = await anyio.to_thread.run_sync(lambda: b.cli("owner", "erase", email, "--finish"))
    assert not (c.data_dir / "workspaces" / workspace).exists(), out
    assert not any(p.name == workspace for p in c.engines())
    assert not pair.rows("SELECT id FROM owners WHERE email = %s", email)
    assert_nothing_on_b(pair, workspace)


async def test_the_internal_engine_endpoints_refuse_anything_unsigned_or_stale(
    pair: Pair, pia: tuple[str, str]
) -> None:
    workspace, token = pia
    c = pair.nodes["node-c"]
    who = Principal("", workspace, "web", "Dashboard", read_only=False, scope=None)
    cases = {
        INTERNAL_ENGINE_PREFIX + "/admin/settings": ("GET", b""),
        INTERNAL_ENGINE_PREFIX + "/admin/export": ("GET", b""),
        INTERNAL_ENGINE_CONTROL: ("POST", b'{"action": "erase"}'),
    }

    def signed(method: str, path: str, body: bytes, secret: str, now: float, target: str) -> dict[str, str]:
        s = signing.sign(secret, method=method, path=path, principal=who, target=target, body=body, now=now)
        return {"x-almanac-cluster-principal": s.principal, "x-almanac-cluster-signature": s.signature}

    for path, (method, body) in cases.items():
        attempts = {
            "a client's bearer token": {"Authorization": f"Bearer {token}"},
            "nothing": {},
            "a stale signature": signed(method, path, body, SECRET, time.time() - 120, "node-c"),
            "another secret": signed(method, path, body, "not-the-secret-" + "y" * 40, time.time(), "node-c"),
            "a signature for another node": signed(method, path, body, SECRET, time.time(), "node-b"),
            "another body": signed(method, path, b'{"action": "stop"}', SECRET, time.time(), "node-c"),
        }
        for what, headers in attempts.items():
            r = httpx.request(method, c.url + path, content=body, headers=headers, timeout=30)
            assert r.status_code == 401, (path, what, r.text)
            assert r.json()["error"]["code"] == "cluster_signature_invalid", (path, what)
    assert (c.data_dir / "workspaces" / workspace).is_dir()  # the erase was not done
    # the same request, signed right, is served: the refusals above were the signature's doing
    path = INTERNAL_ENGINE_PREFIX + "/admin/settings"
    r = httpx.get(c.url + path, headers=signed("GET", path, b"", SECRET, time.time(), "node-c"), timeout=30)
    assert r.status_code == 200, r.text
    assert "max_tokens_default" in r.text
    assert "x-almanac-refused-by-node" not in r.headers  # the engine's answer, passed on
    # signed right, for a workspace node C does not hold: refused by the node (so marked), never
    # served from a second copy
    store = pair.store()
    try:
        elsewhere = store.owners.create("rae@example.com", None)[1].id
        store.nodes.place_on(elsewhere, "node-b", now=time.time(), lease=2.0)
    finally:
        store.close()
    who = Principal("", elsewhere, "web", "Dashboard", read_only=False, scope=None)
    r = httpx.get(c.url + path, headers=signed("GET", path, b"", SECRET, time.time(), "node-c"), timeout=30)
    assert r.status_code == 503 and r.headers["x-almanac-refused-by-node"] == "1", r.text
    assert r.json()["error"]["code"] == "node_unavailable" and int(r.headers["retry-after"]) >= 1
    assert not (c.data_dir / "workspaces" / elsewhere).exists()


async def test_the_owner_node_killed_the_pages_answer_503_and_nothing_is_opened_on_b(
    pair: Pair, pia: tuple[str, str], browser: httpx.AsyncClient
) -> None:
    workspace, _ = pia
    c = pair.nodes["node-c"]
    view = await browser.get("/memories")
    assert view.status_code == 200
    form = {"csrf_token": csrf_of(view.text), "workspace": "default"}
    c.proc.send_signal(signal.SIGKILL)  # no goodbye: its engines exit with it
    c.proc.wait(timeout=30)
    c.reader.join(timeout=10)
    assert c.proc.stdout is not None
    c.proc.stdout.close()

    def refused(r: httpx.Response) -> None:
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) >= 1
        wait = r.headers["retry-after"]
        assert "This workspace&#39;s node" in r.text and "is unavailable" in r.text, r.text
        assert f"try again in {wait} s" in r.text, r.text
        assert '<h1 id="heading">Not available right now</h1>' in r.text

    for path in ("/memories", "/workspace", "/settings", "/activity", "/workspace/export"):
        refused(await browser.get(path))  # at once: C does not answer
    refused(await browser.post("/settings", data={**form, "max_tokens_default": "500"}))
    last_beat = epoch(str(pair.rows("SELECT heartbeat_at FROM nodes WHERE name = 'node-c'")[0][0]))
    wait_for(lambda: time.time() > last_beat + 2.5, timeout=20, what="node-c's heartbeat to go stale")
    for path in ("/memories", "/workspace"):
        stale = await browser.get(path)  # later: C's lease ran out, nobody may serve it
        refused(stale)
        assert "has not been heard from" in stale.text or "lease" in stale.text
    assert_nothing_on_b(pair, workspace)
    assert str(pair.rows("SELECT node FROM placements WHERE workspace_id = %s", workspace)[0][0]) == "node-c"
