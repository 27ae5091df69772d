"""An owner's walk through every page in a real headless Chromium, at desktop width and at a
phone's 390 px (the dashboard of SPEC §11, ``gw:signin``): sign up, sign in (an owner made on the
terminal too), then each page, consent with each pin choice and a password reset link, with
data full of long words, names and URLs. On every page the document must not be wider than the window (no
sideways scrolling), and a screenshot of each page at each size is written for a person to look
at (the folder is printed; ``ALMANAC_SCREENSHOTS`` chooses another).

The walk is a list of :class:`Step`: each opens one page (doing whatever gets it there) and is
photographed and measured after it returns. Add a step to :data:`STEPS` for a new page.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from playwright.sync_api import Page, Playwright

from tests.gateway.auth.oauth.flow import start_authorization
from tests.gateway.e2e import Gateway, start_gateway
from tests.gateway.web.browser import launch
from tests.vaults import vault_zip

PASSWORD = "correct horse battery staple"
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}

#: Long texts without a place to break, as agents and owners really write them.
URL = "https://wiki.example.com/engineering/runbooks/" + "staging-database-failover-" * 6 + "procedure?rev=42"
WORD = "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft" * 2
SCOPE = "project:fjord-infrastructure-migration-" + "x" * 25  # a label's most: 64
CONNECTION = "Claude-Code-on-the-build-server-in-the-basement-" + "x" * 40
WORKSPACE = "research-" + "notes-about-long-running-experiments-" * 2


@dataclass
class Walk:
    """One owner's walk: the gateway, the browser page, and what earlier steps left behind."""

    gateway: Gateway
    page: Page
    email: str
    token: str = ""
    ids: dict[str, str] = field(default_factory=dict)

    def go(self, path: str) -> None:
        self.page.goto(self.gateway.url + path)

    def api(self, path: str, body: Mapping[str, object]) -> str:
        r = httpx.post(
            f"{self.gateway.url}/api/v1{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=60,
        )
        assert r.status_code < 300, r.text
        return str(r.json().get("id", ""))


@dataclass(frozen=True)
class Step:
    name: str  # the screenshot's file name
    show: Callable[[Walk], None]  # leaves the browser on the page to measure and photograph


def sign_up(w: Walk) -> None:
    w.page.context.clear_cookies()
    w.go("/signup")


def signed_up(w: Walk) -> None:
    w.page.get_by_label("Email").fill(w.email)
    w.page.get_by_label("Password", exact=True).fill(PASSWORD)
    w.page.get_by_label("Password again").fill(PASSWORD)
    w.page.get_by_role("button", name="Create account").click()
    w.page.wait_for_url(w.gateway.url + "/")
    seed(w)


def seed(w: Walk) -> None:
    """Memories and connections with long texts, saved as an agent would (REST)."""
    w.token = w.gateway.token(w.email, CONNECTION)
    w.gateway.token(w.email, "Research agent", "--read-only", "--scope", SCOPE)
    w.gateway.cli("workspace", "create", "--owner", w.email, WORKSPACE)
    for value in ("MySQL", "Postgres " + WORD):
        w.ids["fact"] = w.api(
            "/facts", {"subject": "Fjord", "predicate": "database", "object": value, "scope": SCOPE}
        )
    w.ids["note"] = w.api(
        "/memories",
        {
            "statement": f"The failover runbook is at {URL} and says {WORD}.",
            "scope": SCOPE,
            "tags": [WORD[:60]],
        },
    )
    w.api("/log", {"text": f"Shipped search v2 to staging; see {URL}"})
    w.api("/context", {"query": f"where is the failover runbook {URL}", "scope": SCOPE})
    w.api("/context", {"query": "when are deploys frozen"})
    w.ids["retired"] = w.api("/memories", {"statement": "Deploys are frozen until the audit ends."})
    w.api(f"/memories/{w.ids['retired']}/retire", {"reason": f"the audit ended, see {URL}"})


def sign_in(w: Walk) -> None:
    w.page.context.clear_cookies()
    w.go("/login")


def signed_in(w: Walk) -> None:
    w.page.get_by_label("Email").fill(w.email)
    w.page.get_by_label("Password").fill(PASSWORD)
    w.page.get_by_role("button", name="Sign in").click()
    w.page.wait_for_url(w.gateway.url + "/")


def cli_owner_sign_in(w: Walk) -> None:
    """An owner made on the terminal (``almanac owner create``, password from stdin as a script
    gives it) reaches the sign-in page..."""
    w.ids["cli-owner"] = "terminal." + w.email
    w.gateway.cli("owner", "create", w.ids["cli-owner"], "--password-stdin", stdin=PASSWORD + "\n")
    w.page.context.clear_cookies()
    w.go("/login")


def cli_owner_signed_in(w: Walk) -> None:
    """... and signs in with that password."""
    w.page.get_by_label("Email").fill(w.ids["cli-owner"])
    w.page.get_by_label("Password").fill(PASSWORD)
    w.page.get_by_role("button", name="Sign in").click()
    w.page.wait_for_url(w.gateway.url + "/")
    assert w.ids["cli-owner"] in w.page.locator("header").inner_text()


def home(w: Walk) -> None:
    w.go("/")
    command = w.page.locator("pre.command").inner_text()  # runs as is on the gateway's host
    assert (
        command
        == f'almanac token create --data-dir {w.gateway.data_dir} --owner {w.email} --name "my laptop"'
    )


def memories_filtered(w: Walk) -> None:
    w.go("/memories?" + urlencode({"kind": "note", "scope": SCOPE, "q": "runbook"}))
    assert w.page.get_by_role("link", name="The failover runbook").count() == 1


def memory_retired(w: Walk) -> None:
    w.go(f"/memories/{w.ids['retired']}")
    shown = w.page.get_by_role("main").inner_text()
    assert "Why\nthe audit ended, see https://wiki.example.com/" in shown, shown


def revoke_confirm(w: Walk) -> None:
    w.go("/connections")
    w.page.get_by_role("link", name="Revoke Research agent").click()


def revoked(w: Walk) -> None:
    w.page.get_by_label("Why (optional)").fill(f"moved to the new research box, see {URL}")
    w.page.get_by_role("button", name="Revoke").click()
    w.page.wait_for_url(w.gateway.url + "/connections?**")
    assert (
        "moved to the new research box"
        in w.page.get_by_role("table", name="Revoked connections").inner_text()
    )


def activity(w: Walk) -> None:
    w.go("/activity")
    opened = w.page.locator("main summary")
    if opened.count():
        opened.first.click()  # open the newest retrieval's list of memories
    assert SCOPE in w.page.get_by_role("main").inner_text()  # the queries are kept as hashes


def workspace_import(w: Walk) -> None:
    w.go("/workspace")
    w.page.get_by_label("Label").fill("Obsidian")
    w.page.get_by_label("A .zip file").set_input_files(
        {"name": "vault.zip", "mimeType": "application/zip", "buffer": vault_zip()}
    )
    w.page.get_by_role("button", name="Import").click()
    w.page.wait_for_url(w.gateway.url + "/workspace/import?**")
    assert "Finding them by meaning waits for their embeddings" in w.page.get_by_role("main").inner_text()


def consent(w: Walk) -> None:
    """The consent page for a client with a long name and a long redirect host (registered as
    Claude would register itself)."""
    callback = "https://" + "agents." * 8 + "example.com/api/mcp/auth_callback"
    w.go(start_authorization(w.gateway.url, "Research assistant " + WORD, callback, "walk").path)
    w.page.wait_for_url(w.gateway.url + "/consent?**")


#: Where the pinned clients of the walk are sent back (nothing listens: the browser's request is
#: answered by the test, which takes the code from it).
CALLBACK = "http://127.0.0.1:9/walk-callback"
#: The consent page's two pin choices, as its radio buttons are labelled.
READS = {"scope": "this scope only", "unscoped": "this scope and unscoped memories"}


def pinned_consent(reads: str) -> Callable[[Walk], None]:
    """The consent page filled in for a connection pinned to SCOPE that reads ``reads``."""

    def show(w: Walk) -> None:
        started = start_authorization(w.gateway.url, f"Pinned agent {reads}", CALLBACK, reads)
        w.ids.update(client=started.client_id, verifier=started.verifier)
        w.go(started.path)
        w.page.wait_for_url(w.gateway.url + "/consent?**")
        w.page.get_by_label("Name this connection").fill(f"Pinned {reads} {CONNECTION}")
        w.page.get_by_label("Pin to one scope").fill(SCOPE)
        w.page.get_by_label(READS[reads], exact=True).check()

    return show


def pinned_approved(reads: str) -> Callable[[Walk], None]:
    """Approve, take the code the browser is sent back with, exchange it as the client would, and
    find the choice shown on the Connections page."""

    def then(w: Walk) -> None:
        w.page.route(CALLBACK + "**", lambda route: route.fulfill(body="signed in"))
        w.page.get_by_role("button", name="Approve").click()
        w.page.wait_for_url(CALLBACK + "**")
        sent_back = parse_qs(urlsplit(w.page.url).query)
        assert sent_back["state"] == [reads]
        exchange = {
            "grant_type": "authorization_code",
            "code": sent_back["code"][0],
            "client_id": w.ids["client"],
            "redirect_uri": CALLBACK,
            "code_verifier": w.ids["verifier"],
        }
        tokens = httpx.post(w.gateway.url + "/token", data=exchange, timeout=30)
        assert tokens.status_code == 200, tokens.text
        w.page.unroute(CALLBACK + "**")
        w.go("/connections")
        row = w.page.get_by_role("row").filter(has_text=f"Pinned {reads} {CONNECTION[:20]}")
        assert f"reads {READS[reads]}" in row.inner_text()

    return then


def password_reset(w: Walk) -> None:
    """The page of a reset link an operator printed (``almanac owner reset-link``)."""
    w.go(urlsplit(w.gateway.cli("owner", "reset-link", w.email, "--url", w.gateway.url).strip()).path)


def password_was_reset(w: Walk) -> None:
    w.page.get_by_label("New password", exact=True).fill(PASSWORD)
    w.page.get_by_label("New password again").fill(PASSWORD)
    w.page.get_by_role("button", name="Set password").click()
    assert w.page.get_by_role("link", name="Sign in").count() == 1


def authorize_error(w: Walk) -> None:
    w.go("/authorize?response_type=code&client_id=nobody-registered-this-client-" + "z" * 60)
    assert w.page.get_by_role("heading", level=1).inner_text() != ""


#: Each step leaves the page to photograph; ``then`` steps act on it before the next one.
STEPS: list[tuple[Step, Callable[[Walk], None] | None]] = [
    (Step("sign-up", sign_up), signed_up),
    (Step("sign-in-cli-owner", cli_owner_sign_in), cli_owner_signed_in),
    (Step("sign-in", sign_in), signed_in),
    (Step("home", home), None),
    (Step("memories", lambda w: w.go("/memories")), None),
    (Step("memories-filtered", memories_filtered), None),
    (Step("memory-note", lambda w: w.go(f"/memories/{w.ids['note']}")), None),
    (Step("memory-fact", lambda w: w.go(f"/memories/{w.ids['fact']}")), None),
    (Step("memory-retired", memory_retired), None),
    (Step("memory-delete", lambda w: w.go(f"/memories/{w.ids['retired']}/delete")), None),
    (Step("new-token", lambda w: w.go("/tokens/new")), None),
    (Step("connections", lambda w: w.go("/connections")), None),
    (Step("revoke-confirm", revoke_confirm), revoked),
    (Step("connections-revoked", lambda w: None), None),
    (Step("settings", lambda w: w.go("/settings")), None),
    (Step("activity", activity), None),
    (Step("workspace", lambda w: w.go("/workspace")), None),
    (Step("workspace-import", workspace_import), None),
    (Step("account", lambda w: w.go("/account")), None),
    (Step("consent", consent), None),
    (Step("consent-pinned-scope-only", pinned_consent("scope")), pinned_approved("scope")),
    (Step("connections-pinned-scope-only", lambda w: None), None),
    (Step("consent-pinned-and-unscoped", pinned_consent("unscoped")), pinned_approved("unscoped")),
    (Step("authorize-error", authorize_error), None),
    (Step("password-reset", password_reset), password_was_reset),
    (Step("password-reset-done", lambda w: None), None),
]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("walk")
    started = start_gateway(
        root / "data", root / "gateway.log", engine_warm_spare="false", engine_start_timeout="60"
    )
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("ALMANAC_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {folder}", file=sys.__stderr__)
    return folder


def scroll_width(page: Page) -> int:
    return int(page.evaluate("() => document.documentElement.scrollWidth"))


@pytest.mark.req("gw:signin")
@pytest.mark.parametrize("size", list(SIZES))
def test_every_page_fits_the_window_and_is_photographed(
    size: str, gateway: Gateway, shots: Path, playwright: Playwright, tmp_path: Path
) -> None:
    width, height = SIZES[size]
    context = launch(playwright, tmp_path / "profile", width=width, height=height)
    try:
        page = context.pages[0] if context.pages else context.new_page()
        walk = Walk(gateway, page, f"owner.with.a.rather.long.address.{size}@research-lab.example.com")
        too_wide: dict[str, int] = {}
        for step, then in STEPS:
            step.show(walk)
            assert page.evaluate("() => document.scripts.length") == 0, step.name
            page.screenshot(path=str(shots / f"{step.name}-{size}.png"), full_page=True)
            if scroll_width(page) > width:
                too_wide[step.name] = scroll_width(page)
            if then is not None:
                then(walk)
        assert too_wide == {}, f"pages wider than {width} px: {too_wide}"
    finally:
        context.close()
