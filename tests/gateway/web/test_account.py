"""Owner accounts over real HTTP (``gw:signin``, ``gw:ops`` audit): sign-up, sign-in, sign-out,
cookies, throttling, invite-only and closed sign-up, and the home page."""

from __future__ import annotations

import subprocess
from http.cookies import SimpleCookie
from pathlib import Path

import httpx
import pytest

from gateway.auth.passwords import hash_password
from tests.gateway.e2e import ALMANAC, clean_env
from tests.gateway.web.conftest import Site, csrf_of, running_site

pytestmark = pytest.mark.anyio

PASSWORD = "correct horse battery"


async def sign_up(
    client: httpx.AsyncClient, email: str, password: str = PASSWORD, **extra: str
) -> httpx.Response:
    page = await client.get("/signup")
    form = {"csrf_token": csrf_of(page.text), "email": email, "password": password, "confirm": password}
    return await client.post("/signup", data={**form, **extra})


async def sign_in(
    client: httpx.AsyncClient, email: str, password: str = PASSWORD, **extra: str
) -> httpx.Response:
    page = await client.get("/login")
    form = {"csrf_token": csrf_of(page.text), "email": email, "password": password}
    return await client.post("/login", data={**form, **extra})


async def sign_out(client: httpx.AsyncClient) -> httpx.Response:
    home = await client.get("/")
    return await client.post("/logout", data={"csrf_token": csrf_of(home.text)})


def audit_kinds(site: Site) -> list[str]:
    return [e.kind for e in reversed(site.store.audit_log.events())]


@pytest.mark.req("gw:signin", "gw:ops")
async def test_sign_up_home_sign_out_sign_in(data_dir: Path, database_url: str | None) -> None:
    async with running_site(data_dir, database_url=database_url) as site, site.client() as client:
        assert (await client.get("/")).headers["location"] == "/login?next=%2F"
        r = await sign_up(client, "ada@example.com")
        assert r.status_code == 303 and r.headers["location"] == "/"
        home = await client.get("/")
        assert home.status_code == 200
        assert "ada@example.com" in home.text
        assert f'value="{site.url}/mcp"' in home.text
        assert f"almanac token create --data-dir {data_dir} --owner ada@example.com" in home.text
        cookie = dict(client.cookies)
        r = await sign_out(client)
        assert r.status_code == 303 and r.headers["location"] == "/login?signed_out=1"
        # the old cookie no longer works: the session ended on the server
        async with site.client() as replay:
            replay.cookies.update(cookie)
            assert (await replay.get("/")).status_code == 303
        assert (await client.get("/")).status_code == 303
        r = await sign_in(client, "ada@example.com", next="/?tab=1")
        assert r.status_code == 303 and r.headers["location"] == "/?tab=1"
        assert (await client.get("/")).status_code == 200
        owner = site.store.owners.by_email("ada@example.com")
        assert [w.name for w in site.store.owners.workspaces(owner.id)] == ["default"]
        kinds = audit_kinds(site)
        assert kinds[-4:] == ["signup", "signin.success", "signout", "signin.success"]


@pytest.mark.req("gw:signin")
async def test_the_cli_owner_password_signs_in_on_the_web(data_dir: Path, database_url: str | None) -> None:
    subprocess.run(
        [ALMANAC, "owner", "create", "cli@example.com", "--data-dir", str(data_dir)],
        input=PASSWORD + "\n",
        text=True,
        check=True,
        capture_output=True,
        env=clean_env({"ALMANAC_DATABASE_URL": database_url} if database_url else {}),
        timeout=60,
    )
    async with running_site(data_dir, database_url=database_url) as site, site.client() as client:
        assert (await sign_in(client, "cli@example.com", "not the password")).status_code == 400
        r = await sign_in(client, "cli@example.com")
        assert r.status_code == 303
        assert "cli@example.com" in (await client.get("/")).text
        stored = site.store.owners.password_hash(site.store.owners.by_email("cli@example.com").id)
        assert stored is not None and stored.startswith("$argon2id$")


@pytest.mark.req("gw:signin")
async def test_wrong_password_and_unknown_email_look_the_same(
    data_dir: Path, database_url: str | None
) -> None:
    async with running_site(data_dir, database_url=database_url) as site, site.client() as client:
        await sign_up(client, "bo@example.com")
        await sign_out(client)
        wrong = await sign_in(client, "bo@example.com", "wrong password!")
        unknown = await sign_in(client, "nobody@example.com")
        assert wrong.status_code == unknown.status_code == 400
        for r in (wrong, unknown):
            assert "do not match an account" in r.text
            assert "set-cookie" not in {k.lower() for k in r.headers if "almanac_session" in r.headers[k]}
        assert (await client.get("/")).status_code == 303
        failures = [e for e in site.store.audit_log.events() if e.kind == "signin.failure"]
        assert {e.detail["reason"] for e in failures} == {"wrong password", "no such owner"}


@pytest.mark.req("gw:signin")
async def test_session_cookie_is_httponly_samesite_and_secure_behind_https(
    data_dir: Path, database_url: str | None
) -> None:
    async with running_site(data_dir, database_url=database_url) as site, site.client() as client:
        r = await sign_up(client, "local@example.com")
        morsel = SimpleCookie(r.headers["set-cookie"])["almanac_session"]
        assert morsel["httponly"] and morsel["samesite"].lower() == "lax" and morsel["path"] == "/"
        assert morsel["max-age"] == "1209600"  # session_max_age
        assert not morsel["secure"]  # plain http on loopback: a Secure cookie would never come back
    async with (
        running_site(data_dir, database_url=database_url, public_url="https://mem.example.com") as site,
        site.client() as client,
    ):
        # behind a TLS proxy: the browser speaks https to the proxy, so Secure cookies come back
        client.headers["Host"] = "mem.example.com"
        client.headers["Origin"] = "https://mem.example.com"
        page = await client.get("/login")
        presession = SimpleCookie(page.headers["set-cookie"])["__Host-almanac_presession"]
        assert presession["secure"] and presession["httponly"] and presession["samesite"] == "strict"
        r = await client.post(
            "/login",
            data={"csrf_token": csrf_of(page.text), "email": "local@example.com", "password": PASSWORD},
            headers={"Cookie": f"__Host-almanac_presession={presession.value}"},
        )
        assert r.status_code == 303
        cookies = [SimpleCookie(v) for k, v in r.headers.multi_items() if k == "set-cookie"]
        session = next(c["__Host-almanac_session"] for c in cookies if "__Host-almanac_session" in c)
        assert session["secure"] and session["httponly"] and session["samesite"].lower() == "lax"


@pytest.mark.req("gw:signin", "gw:ops")
async def test_sign_in_is_throttled_per_account(data_dir: Path, database_url: str | None) -> None:
    async with (
        running_site(data_dir, database_url=database_url, login_max_failures=3) as site,
        site.client() as client,
    ):
        await sign_up(client, "cy@example.com")
        await sign_out(client)
        for _ in range(3):
            assert (await sign_in(client, "cy@example.com", "guess guess guess")).status_code == 400
        r = await sign_in(client, "cy@example.com")  # the right password, but throttled
        assert r.status_code == 429 and "Too many failed sign-ins for this account" in r.text
        assert (await client.get("/")).status_code == 303
        # another account from the same address is not affected by this account's limit
        await sign_up(client, "di@example.com")
        await sign_out(client)
        assert (await sign_in(client, "di@example.com")).status_code == 303
        owner = site.store.owners.by_email("cy@example.com")
        throttled = [e for e in site.store.audit_log.events() if e.kind == "signin.throttled"]
        assert len(throttled) == 1 and throttled[0].owner_id == owner.id
        assert throttled[0].detail["limit"] == "account" and throttled[0].remote == "127.0.0.1"


@pytest.mark.req("gw:signin")
async def test_sign_in_is_throttled_per_address(data_dir: Path, database_url: str | None) -> None:
    settings = {"login_max_failures": 100, "login_max_failures_per_address": 4}
    async with running_site(data_dir, database_url=database_url, **settings) as site, site.client() as client:
        await sign_up(client, "ed@example.com")
        await sign_out(client)
        for n in range(4):
            assert (await sign_in(client, f"guess{n}@example.com")).status_code == 400
        r = await sign_in(client, "ed@example.com")
        assert r.status_code == 429 and "from your address" in r.text
        assert site.store.audit_log.events(limit=1)[0].detail["limit"] == "address"


@pytest.mark.req("gw:signin", "sec:authz")
async def test_a_stranger_who_knows_the_email_cannot_lock_the_owner_out(
    data_dir: Path, database_url: str | None
) -> None:
    async with (
        running_site(data_dir, database_url=database_url, login_max_failures=3) as site,
        site.client() as owner,
        site.client("127.0.0.2") as stranger,
    ):
        await sign_up(owner, "gi@example.com")
        await sign_out(owner)
        for _ in range(3):
            assert (await sign_in(stranger, "gi@example.com", "guess guess guess")).status_code == 400
        held = await sign_in(stranger, "gi@example.com")  # even the right password, from there
        assert held.status_code == 429
        assert "Too many failed sign-ins for this account from your address" in held.text
        assert (await sign_in(owner, "gi@example.com")).status_code == 303  # the owner, elsewhere


@pytest.mark.req("gw:signin", "sec:authz")
async def test_guessing_from_many_addresses_stops_for_all_but_the_owners_own(
    data_dir: Path, database_url: str | None
) -> None:
    settings = {"login_max_failures": 3, "login_max_failures_per_account": 4}
    async with running_site(data_dir, database_url=database_url, **settings) as site:
        async with site.client() as owner:
            await sign_up(owner, "ho@example.com")  # the owner's address is now known
            await sign_out(owner)
        for address, tries in (("127.0.0.2", 3), ("127.0.0.3", 1)):
            async with site.client(address) as stranger:
                for _ in range(tries):
                    assert (await sign_in(stranger, "ho@example.com", "guess guess")).status_code == 400
        async with site.client("127.0.0.4") as fresh:
            held = await sign_in(fresh, "ho@example.com")
            assert held.status_code == 429 and "Too many failed sign-ins for this account." in held.text
        async with site.client() as owner:
            assert (await sign_in(owner, "ho@example.com")).status_code == 303
        limits = [e.detail["limit"] for e in site.store.audit_log.events() if e.kind == "signin.throttled"]
        assert limits == ["account_total"]


@pytest.mark.req("gw:signin", "sec:authz")
async def test_sign_in_and_sign_up_posts_are_rate_limited_per_address(
    data_dir: Path, database_url: str | None
) -> None:
    async with (
        running_site(data_dir, database_url=database_url, signin_rate_limit=3) as site,
        site.client() as client,
        site.client("127.0.0.2") as other,
    ):
        await sign_up(client, "io@example.com")  # 1
        await sign_out(client)
        assert (await sign_in(client, "io@example.com", "guess guess")).status_code == 400  # 2
        assert (await sign_in(client, "io@example.com")).status_code == 303  # 3
        await sign_out(client)
        refused = await sign_in(client, "io@example.com")
        assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 20
        assert "Too many sign-in attempts from your address (at most 3 a minute)" in refused.text
        refused = await sign_up(client, "jo@example.com")
        assert refused.status_code == 429 and refused.headers["retry-after"]
        assert (await sign_in(other, "io@example.com")).status_code == 303
        assert (
            site.store.accounts.login_failures("address:127.0.0.1", window=900) == 1
        )  # refusals are not failures


@pytest.mark.req("gw:signin")
async def test_a_successful_sign_in_clears_the_account_failures(
    data_dir: Path, database_url: str | None
) -> None:
    async with (
        running_site(data_dir, database_url=database_url, login_max_failures=3) as site,
        site.client() as client,
    ):
        await sign_up(client, "fa@example.com")
        await sign_out(client)
        for _ in range(2):
            await sign_in(client, "fa@example.com", "guess guess guess")
        assert (await sign_in(client, "fa@example.com")).status_code == 303
        await sign_out(client)
        for _ in range(2):
            await sign_in(client, "fa@example.com", "guess guess guess")
        assert (await sign_in(client, "fa@example.com")).status_code == 303
        pair = "account:fa@example.com|address:127.0.0.1"
        assert site.store.accounts.login_failures(pair, window=900) == 0


@pytest.mark.req("gw:signin")
async def test_sign_up_refuses_bad_input_and_changes_nothing(
    data_dir: Path, database_url: str | None
) -> None:
    async with running_site(data_dir, database_url=database_url) as site, site.client() as client:
        r = await sign_up(client, "not-an-email")
        assert r.status_code == 400 and "is not an email address" in r.text
        r = await sign_up(client, "gi@example.com", "short")
        assert r.status_code == 400 and "at least 10 characters" in r.text
        page = await client.get("/signup")
        r = await client.post(
            "/signup",
            data={
                "csrf_token": csrf_of(page.text),
                "email": "gi@example.com",
                "password": PASSWORD,
                "confirm": "x",
            },
        )
        assert r.status_code == 400 and "the two passwords differ" in r.text
        assert 'value="gi@example.com"' in r.text  # the form keeps what was typed
        assert audit_kinds(site) == []
        await sign_up(client, "gi@example.com")
        await sign_out(client)
        r = await sign_up(client, "GI@example.com")
        assert r.status_code == 409 and "already exists" in r.text


@pytest.mark.req("gw:signin")
async def test_invite_only_sign_up(data_dir: Path, database_url: str | None) -> None:
    async with (
        running_site(data_dir, database_url=database_url, signup="invite") as site,
        site.client() as client,
    ):
        page = await client.get("/signup")
        assert 'name="invite"' in page.text
        r = await sign_up(client, "ha@example.com")
        assert r.status_code == 400 and "needs an invite code" in r.text
        r = await sign_up(client, "ha@example.com", invite="made-up")
        assert r.status_code == 400 and "unknown or already used" in r.text
        made = subprocess.run(
            [ALMANAC, "invite", "create", "--note", "for ha", "--data-dir", str(data_dir)],
            text=True,
            check=True,
            capture_output=True,
            env=clean_env({"ALMANAC_DATABASE_URL": database_url} if database_url else {}),
            timeout=60,
        )
        code = made.stdout.strip()
        assert made.stdout == code + "\n" and "works once" in made.stderr
        assert (await sign_up(client, "ha@example.com", invite=code)).status_code == 303
        await sign_out(client)
        r = await sign_up(client, "hb@example.com", invite=code)
        assert r.status_code == 400 and "unknown or already used" in r.text
        with pytest.raises(Exception, match="no owner"):
            site.store.owners.by_email("hb@example.com")


@pytest.mark.req("gw:signin")
async def test_closed_sign_up(data_dir: Path, database_url: str | None) -> None:
    async with (
        running_site(data_dir, database_url=database_url, signup="closed") as site,
        site.client() as client,
    ):
        page = await client.get("/signup")
        assert page.status_code == 403 and "Sign-up is closed" in page.text
        login = await client.get("/login")
        assert "Create an account" not in login.text
        r = await client.post(
            "/signup",
            data={
                "csrf_token": csrf_of(login.text),
                "email": "io@example.com",
                "password": PASSWORD,
                "confirm": PASSWORD,
            },
        )
        assert r.status_code == 403 and "sign-up is closed" in r.text
        with pytest.raises(Exception, match="no owner"):
            site.store.owners.by_email("io@example.com")
        site.store.owners.create("op@example.com", hash_password(PASSWORD))
        assert (await sign_in(client, "op@example.com")).status_code == 303


@pytest.mark.req("gw:signin", "sec:authz")
async def test_next_never_leaves_the_site(data_dir: Path, database_url: str | None) -> None:
    async with running_site(data_dir, database_url=database_url) as site, site.client() as client:
        await sign_up(client, "ju@example.com")
        await sign_out(client)
        for evil in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
            r = await sign_in(client, "ju@example.com", next=evil)
            assert r.status_code == 303 and r.headers["location"] == "/", evil
            await sign_out(client)
        assert site.store.audit_log.events(limit=1)[0].kind == "signout"
