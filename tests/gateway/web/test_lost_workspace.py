"""An owner whose workspace's node was declared lost, in a real headless Chromium
(``run:scale-out``): a real PostgreSQL control plane and two real ``almanac serve`` nodes (node-c,
holding the workspace, killed and declared lost; node-b, where the browser signs in).

The home page marks the workspace as lost; its pages answer 410 with a page that says what
happened (the server that kept it was lost, nothing was deleted, nothing can be written) and what
to do (contact the operator, who restores it from a backup — or from the owner's export, if they
kept one), not a 500 or an empty page. While the operator restores it, the pages answer 503 with
``Retry-After`` and say so; restored, the pages work again."""

from __future__ import annotations

import time

import httpx
import pytest
from playwright.sync_api import Page, Response, expect

from tests.gateway.cluster.nodes import started_nodes
from tests.gateway.cluster.test_pages_across_nodes import Pair
from tests.gateway.e2e import wait_for
from tests.gateway.web.test_pages import PASSWORD

pytestmark = [pytest.mark.slow, pytest.mark.req("run:scale-out")]

EMAIL = "uma@example.com"


pair = started_nodes("pair", "lost-pages", ("node-b", "node-c"), Pair)


def _lose_node_c(pair: Pair) -> None:
    c = pair.nodes["node-c"]
    c.stop()
    store = pair.store()
    try:
        wait_for(
            lambda: time.time() - next(n for n in store.nodes.all() if n.name == "node-c").heartbeat_at > 2.5,
            timeout=30,
            what="node-c silent",
        )
        store.lost.mark("node-c", now=time.time(), heartbeat_timeout=2.0, force=False)
    finally:
        store.close()


def _sign_in(page: Page, url: str) -> None:
    page.goto(url + "/login")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(url + "/")


def _goto_until(page: Page, url: str, status: int) -> Response:
    """Load ``url`` until it answers ``status``: a node reads a workspace's placement again at most
    half a second after it last did (``gateway/cluster/router.py`` ``TTL_S``), so a change made in
    the control plane shows within that (bounded wait, no fixed sleep)."""
    answers: list[Response] = []

    def answered() -> bool:
        answer = page.goto(url)
        assert answer is not None
        answers.append(answer)
        return answer.status == status

    wait_for(answered, timeout=15, what=f"{url} to answer {status}")
    return answers[-1]


def test_an_owner_sees_what_happened_to_a_lost_workspace_and_what_to_do(pair: Pair, page: Page) -> None:
    workspace, _ = pair.owner_on_c(EMAIL)
    b = pair.nodes["node-b"]
    _lose_node_c(pair)
    _sign_in(page, b.url)
    row = page.get_by_role("row", name="default")
    expect(row).to_contain_text("Lost: its server is gone")
    row.get_by_role("link", name="What to do").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("This workspace's server was lost")
    for path in ("/workspace", "/memories", "/settings"):
        answer = page.goto(b.url + path)
        assert answer is not None and answer.status == 410, path
        assert "retry-after" not in answer.headers
        expect(page.get_by_role("heading", level=1)).to_have_text("This workspace's server was lost")
        expect(page.get_by_role("alert")).to_contain_text("Nothing was deleted")
        expect(page.get_by_role("alert")).to_contain_text("workspace_lost")
        expect(page.get_by_text("Contact the operator of this service.")).to_be_visible()
        expect(page.get_by_text("export")).to_have_count(1)
        expect(page.get_by_role("link", name="Back to your workspaces")).to_be_visible()
    # the operator restores it: the pages say so and when to look again
    store = pair.store()
    try:
        move = store.moves.begin(workspace, "node-c", "node-b", now=time.time(), timeout=120)
        answer = _goto_until(page, b.url + "/workspace", 503)
        assert int(answer.headers["retry-after"]) >= 1
        expect(page.get_by_role("heading", level=1)).to_have_text("This workspace is being restored")
        expect(page.get_by_role("status")).to_contain_text("try again in")
        page.goto(b.url + "/")
        expect(page.get_by_role("row", name="default")).to_contain_text("Being restored")
        # called off: lost again
        assert store.moves.abort(move, now=time.time(), reason="test: abandoned")
    finally:
        store.close()
    _goto_until(page, b.url + "/workspace", 410)
    expect(page.get_by_role("heading", level=1)).to_have_text("This workspace's server was lost")

    # a program gets the same refusal as JSON (the page is for a browser only)
    store = pair.store()
    try:
        _, token = store.connections.create_pat(store.owners.by_email(EMAIL).id, workspace, "script")
    finally:
        store.close()
    r = httpx.get(b.url + "/api/v1/memories", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 410 and r.json()["error"]["code"] == "workspace_lost", r.text
