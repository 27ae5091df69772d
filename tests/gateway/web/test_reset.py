"""``/reset/<secret>`` end to end through the real gateway process (``gw:signin``, ``sec:authz``):
the operator prints a link with ``almanac owner reset-link``, the owner sets a password on the page
(CSRF-protected, under the sign-up rules) and signs in with it; the link then refuses a second use,
an expired link refuses both to show its form and to take one, and every step is audited."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from gateway.auth.passwords import MIN_PASSWORD
from gateway.control.store import ControlPlane
from tests.gateway.e2e import Gateway, start_gateway
from tests.gateway.web.conftest import csrf_of
from tests.gateway.web.test_account import sign_in
from tests.gateway.web.test_pages import assert_accessible

pytestmark = [pytest.mark.slow]

EMAIL = "rue@example.com"
NEW = "a brand new password"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("reset")
    gw = start_gateway(root / "data", root / "gateway.log", engine_warm_spare="false")
    gw.cli("owner", "create", EMAIL)  # no password: it cannot sign in yet
    yield gw
    gw.stop()


@pytest.fixture
async def browser(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30, headers={"Accept": "text/html"}) as client:
        yield client


def link_path(gateway: Gateway) -> str:
    url = gateway.cli("owner", "reset-link", EMAIL, "--url", gateway.url).strip()
    assert url.startswith(gateway.url + "/reset/")
    return url.removeprefix(gateway.url)


async def submit(
    browser: httpx.AsyncClient, path: str, password: str, confirm: str | None = None
) -> httpx.Response:
    page = await browser.get(path)
    assert page.status_code == 200, page.text
    form = {
        "csrf_token": csrf_of(page.text),
        "password": password,
        "confirm": password if confirm is None else confirm,
    }
    return await browser.post(path, data=form)


@pytest.mark.anyio
@pytest.mark.req("gw:signin", "sec:authz")
async def test_a_reset_link_sets_a_password_once_and_the_owner_signs_in(
    gateway: Gateway, browser: httpx.AsyncClient
) -> None:
    assert (await sign_in(browser, EMAIL, NEW)).status_code == 400  # no password yet
    path = link_path(gateway)
    page = await browser.get(path)
    assert page.status_code == 200 and EMAIL in page.text and "This link works once." in page.text
    assert f"At least {MIN_PASSWORD} characters." in page.text
    assert page.headers["referrer-policy"] == "strict-origin" and page.headers["cache-control"] == "no-store"
    # a form without this browser's token, or from another site, is refused and spends nothing
    forged = await browser.post(path, data={"csrf_token": "forged", "password": NEW, "confirm": NEW})
    assert forged.status_code == 403
    other_site = await browser.post(
        path,
        data={"csrf_token": csrf_of(page.text), "password": NEW, "confirm": NEW},
        headers={"Origin": "https://evil.example"},
    )
    assert other_site.status_code == 403
    # the rules sign-up states, and typing it twice
    short = await submit(browser, path, "x" * (MIN_PASSWORD - 1))
    assert short.status_code == 400 and f"at least {MIN_PASSWORD} characters" in short.text
    differ = await submit(browser, path, NEW, NEW + "!")
    assert differ.status_code == 400 and "the two passwords differ" in differ.text
    done = await submit(browser, path, NEW)
    assert done.status_code == 200 and "Your new password is set." in done.text
    # it works: sign in with it
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30, headers={"Accept": "text/html"}) as fresh:
        assert (await sign_in(fresh, EMAIL, NEW)).status_code == 303
        assert EMAIL in (await fresh.get("/")).text
        # used once: the page says so, and a second password is refused and changes nothing
        again = await fresh.get(path)
        assert again.status_code == 400 and "used already, it expired" in again.text
        reuse = await fresh.post(
            path,
            data={
                "csrf_token": csrf_of(again.text),
                "password": "another password",
                "confirm": "another password",
            },
        )
        assert reuse.status_code == 400 and "used already, it expired" in reuse.text
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30, headers={"Accept": "text/html"}) as fresh:
        assert (await sign_in(fresh, EMAIL, "another password")).status_code == 400
        assert (await sign_in(fresh, EMAIL, NEW)).status_code == 303
    audit = gateway.cli("audit", "--owner", EMAIL)
    for kind in ("password.reset_link", "password.reset", "password.reset_refused"):
        assert f'"kind": "{kind}"' in audit
    assert path.rsplit("/", 1)[1] not in audit  # the secret is never written down


@pytest.mark.anyio
@pytest.mark.req("gw:signin", "sec:authz")
async def test_an_expired_or_unknown_link_is_refused_and_a_reset_signs_out_everywhere(
    gateway: Gateway, browser: httpx.AsyncClient
) -> None:
    store = ControlPlane.open(gateway.data_dir / "control.db", create=False)  # the gateway's own database
    try:
        owner = store.owners.by_email(EMAIL)
        expired, _ = store.passwords.create_reset_link(owner.id, ttl=-1)  # a link whose time has passed
    finally:
        store.close()
    for path in (f"/reset/{expired}", "/reset/not-a-link", "/reset/" + "x" * 5000):
        page = await browser.get(path)
        assert (
            page.status_code == 400 and "used already, it expired" in page.text and "<form" not in page.text
        )
    login = await browser.get("/login")
    form = {"csrf_token": csrf_of(login.text), "password": "late password 1", "confirm": "late password 1"}
    assert (await browser.post(f"/reset/{expired}", data=form)).status_code == 400
    # a browser signed in before a reset is signed out by it
    if (await sign_in(browser, EMAIL, NEW)).status_code != 303:
        pytest.fail("the owner should sign in with the password set by the previous test")
    assert (await browser.get("/")).status_code == 200
    path = link_path(gateway)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30, headers={"Accept": "text/html"}) as other:
        assert (await submit(other, path, "after the reset")).status_code == 200
    assert (await browser.get("/")).status_code == 303  # back to sign-in
    assert (await sign_in(browser, EMAIL, "late password 1")).status_code == 400
    assert (await sign_in(browser, EMAIL, "after the reset")).status_code == 303


@pytest.mark.req("gw:signin")
def test_a_reset_link_in_a_real_browser(site: Gateway, page: Page, tmp_path: Path) -> None:
    site.cli("owner", "create", "kai@example.com")
    url = site.cli("owner", "reset-link", "kai@example.com", "--url", site.url).strip()
    page.goto(url)
    assert_accessible(page)
    page.screenshot(path=str(tmp_path / "reset.png"), full_page=True)
    page.get_by_label("New password", exact=True).fill(NEW)
    page.get_by_label("New password again").fill(NEW)
    page.get_by_role("button", name="Set password").click()
    assert page.get_by_role("status").inner_text() == "Your new password is set."
    assert_accessible(page)
    page.get_by_role("link", name="Sign in").click()
    page.get_by_label("Email").fill("kai@example.com")
    page.get_by_label("Password").fill(NEW)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url + "/")
    page.goto(url)
    assert_accessible(page)
    assert "used already, it expired" in page.get_by_role("alert").inner_text()
