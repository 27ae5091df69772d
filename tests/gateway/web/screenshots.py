"""``scripts/screenshots``: photograph the pages into ``docs/screenshots/`` (one PNG each).

Each shot is a function of (gateway, page, signed-in email) that leaves the page showing what to
photograph; add one to ``SHOTS`` for a new page.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

from tests.gateway.auth.oauth.flow import start_authorization
from tests.gateway.e2e import Gateway, connect, start_gateway
from tests.gateway.web.browser import launch, off_loop
from tests.vaults import vault_zip

OUT = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
EMAIL = "ada@example.com"
PASSWORD = "correct horse battery"

Shot = Callable[[Gateway, Page], None]


def sign_in(gateway: Gateway, page: Page) -> None:
    page.context.clear_cookies()
    page.goto(gateway.url + "/login")
    page.get_by_label("Email").fill(EMAIL)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(gateway.url + "/")


def shot_signin(gateway: Gateway, page: Page) -> None:
    page.context.clear_cookies()
    page.goto(gateway.url + "/login")


def shot_signup(gateway: Gateway, page: Page) -> None:
    page.context.clear_cookies()
    page.goto(gateway.url + "/signup")


def shot_home(gateway: Gateway, page: Page) -> None:
    sign_in(gateway, page)


def shot_new_token(gateway: Gateway, page: Page) -> None:
    sign_in(gateway, page)
    page.goto(gateway.url + "/tokens/new")
    page.get_by_label("Name").fill("Claude Code on laptop")


def shot_consent(gateway: Gateway, page: Page) -> None:
    """The consent page for a client (registered as Claude would) asking to connect."""
    sign_in(gateway, page)
    callback = "https://claude.ai/api/mcp/auth_callback"
    page.goto(gateway.url + start_authorization(gateway.url, "Claude", callback, "screenshot").path)
    page.wait_for_url(gateway.url + "/consent?**")


def shot_workspace_import(gateway: Gateway, page: Page) -> None:
    """The summary after importing a small Obsidian vault (zip) into the default workspace."""
    seed(gateway)
    sign_in(gateway, page)
    page.goto(gateway.url + "/workspace")
    page.get_by_label("Label").fill("Obsidian")
    page.get_by_label("A .zip file").set_input_files(
        {"name": "vault.zip", "mimeType": "application/zip", "buffer": vault_zip()}
    )
    page.get_by_role("button", name="Import").click()
    page.wait_for_url(gateway.url + "/workspace/import?**")


def shot_workspace(gateway: Gateway, page: Page) -> None:
    seed(gateway)
    sign_in(gateway, page)
    page.goto(gateway.url + "/workspace")


def shot_account(gateway: Gateway, page: Page) -> None:
    sign_in(gateway, page)
    page.goto(gateway.url + "/account")


_SEEDED: dict[str, str] = {}


def seed(gateway: Gateway) -> dict[str, str]:
    """A few memories, saved once through the REST API as an agent would: a fact with history,
    notes (one scoped, one retired) and a log entry. Returns their ids by name."""
    if _SEEDED:
        return _SEEDED
    token = gateway.token(EMAIL, "Claude Code on laptop")

    def post(path: str, body: Mapping[str, object]) -> str:
        r = httpx.post(
            f"{gateway.url}/api/v1{path}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        r.raise_for_status()
        return str(r.json()["id"])

    for value in ("MySQL", "Postgres"):
        fact = {"subject": "Fjord", "predicate": "database", "object": value, "scope": "project:fjord"}
        _SEEDED["fact"] = post("/facts", fact)
    post(
        "/memories",
        {"statement": "The staging database lives on kelp (eu-west-1).", "scope": "project:fjord"},
    )
    post("/memories", {"statement": "Standups moved to 9:30 on Mondays and Thursdays."})
    post("/log", {"text": "Shipped search v2 to staging; backups verified."})
    _SEEDED["retired"] = post("/memories", {"statement": "Deploys are frozen until the audit ends."})
    retire = f"{gateway.url}/api/v1/memories/{_SEEDED['retired']}/retire"
    httpx.post(
        retire, json={"reason": "the audit ended"}, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    return _SEEDED


def shot_memories(gateway: Gateway, page: Page) -> None:
    seed(gateway)
    sign_in(gateway, page)
    page.goto(gateway.url + "/memories")


def shot_memory(gateway: Gateway, page: Page) -> None:
    """One fact with its history."""
    ids = seed(gateway)
    sign_in(gateway, page)
    page.goto(f"{gateway.url}/memories/{ids['fact']}")


def shot_memory_delete(gateway: Gateway, page: Page) -> None:
    """The confirmation page for deleting a retired note."""
    ids = seed(gateway)
    sign_in(gateway, page)
    page.goto(f"{gateway.url}/memories/{ids['retired']}/delete")


_RETRIEVED: dict[str, str] = {}


def _seed(gateway: Gateway) -> None:
    """The memories of :func:`seed`, two more connections and two retrievals (once per run)."""
    seed(gateway)
    if _RETRIEVED:
        return
    token = gateway.token(EMAIL, "Cursor on desktop")
    gateway.token(EMAIL, "Research agent", "--read-only", "--scope", "project:fjord")

    async def work() -> None:
        async with connect(gateway, token) as client:
            for statement in (
                "Fjord's database is Postgres 16.",
                "The Fjord standup moved to 9:30 on weekdays.",
                "Deploys to staging happen from the release branch.",
            ):
                await client.call_tool("remember", {"statement": statement})
            await client.call_tool("get_context", {"query": "Fjord database"})
            await client.call_tool("get_context", {"query": "when is the standup"})

    off_loop(work)
    _RETRIEVED["token"] = token


def shot_connections(gateway: Gateway, page: Page) -> None:
    _seed(gateway)
    sign_in(gateway, page)
    page.goto(gateway.url + "/connections")


def shot_connection_revoke(gateway: Gateway, page: Page) -> None:
    """The confirmation asked before revoking a connection."""
    _seed(gateway)
    sign_in(gateway, page)
    page.goto(gateway.url + "/connections")
    page.get_by_role("link", name="Revoke Research agent").click()
    page.wait_for_url(gateway.url + "/connections/revoke?**")


def shot_settings(gateway: Gateway, page: Page) -> None:
    _seed(gateway)
    sign_in(gateway, page)
    page.goto(gateway.url + "/settings")
    if page.get_by_role("button", name="Clear notes_limit").count() == 0:
        page.get_by_label("notes_limit").fill("12")
        page.get_by_role("button", name="Save changes").click()
        page.wait_for_url(gateway.url + "/settings?**")
    for _ in range(100):  # until the restarted engine knows its provider's state
        if "still checking" not in page.content():
            break
        page.reload()


def shot_activity(gateway: Gateway, page: Page) -> None:
    _seed(gateway)
    sign_in(gateway, page)
    page.goto(gateway.url + "/activity")
    page.locator("main summary").first.click()  # open the first entry's list of memories


SHOTS: dict[str, Shot] = {
    "sign-in": shot_signin,
    "sign-up": shot_signup,
    "home": shot_home,
    "new-token": shot_new_token,
    "consent": shot_consent,
    "memories": shot_memories,
    "memory": shot_memory,
    "memory-delete": shot_memory_delete,
    "connections": shot_connections,
    "connection-revoke": shot_connection_revoke,
    "settings": shot_settings,
    "activity": shot_activity,
    "workspace-import": shot_workspace_import,
    "workspace": shot_workspace,
    "account": shot_account,
}


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="almanac-shots-") as tmp:
        root = Path(tmp)
        gateway = start_gateway(
            root / "data", root / "gateway.log", engine_warm_spare="false", engine_start_timeout="60"
        )
        try:
            gateway.cli("owner", "create", EMAIL, stdin=PASSWORD + "\n")
            with sync_playwright() as pw:
                context = launch(pw, root / "profile", width=1100, height=760)
                page = context.new_page()
                for name in names or list(SHOTS):
                    SHOTS[name](gateway, page)
                    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
                    print(f"docs/screenshots/{name}.png", file=sys.stderr)
                context.close()
        finally:
            gateway.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
