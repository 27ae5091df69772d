"""``almanac owner create | set-password | reset-link`` (``run:cli``, ``gw:signin``): a password
chosen on a real terminal (asked twice, hidden) or given on stdin with a flag, under the same rules
as sign-up; and the owner then signs in on the web with it."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.auth.passwords import MIN_PASSWORD, verify_password
from gateway.control.store import ControlPlane
from tests.gateway.cli.terminal import Terminal
from tests.gateway.e2e import ALMANAC, clean_env
from tests.gateway.web.conftest import running_site
from tests.gateway.web.test_account import sign_in

EMAIL = "ada@example.com"
GOOD = "a terminal password"


def almanac(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ALMANAC, *args], input=stdin, capture_output=True, text=True, timeout=60, env=clean_env({})
    )


def on_terminal(*args: str) -> Terminal:
    return Terminal([ALMANAC, *args], clean_env({}))


def stored_hash(data_dir: Path, email: str = EMAIL) -> str | None:
    store = ControlPlane.open(data_dir / "control.db", create=False)
    try:
        return store.owners.password_hash(store.owners.by_email(email).id)
    finally:
        store.close()


@pytest.mark.anyio
@pytest.mark.req("run:cli", "gw:signin")
async def test_owner_create_on_a_terminal_asks_twice_hidden_and_the_owner_signs_in(data_dir: Path) -> None:
    term = on_terminal("owner", "create", EMAIL, "--data-dir", str(data_dir))
    term.expect(f"New password for {EMAIL} (Enter for none): ")
    term.type("short")
    term.expect("Type it again: ")
    term.type("short")
    term.expect(f"choose a password of at least {MIN_PASSWORD} characters")  # the rule sign-up states
    term.expect(f"New password for {EMAIL} (Enter for none): ")
    term.type(GOOD)
    term.expect("Type it again: ")
    term.type(GOOD + " but different")
    term.expect("the two passwords differ")
    term.expect(f"New password for {EMAIL} (Enter for none): ")
    term.type(GOOD)
    term.expect("Type it again: ")
    term.type(GOOD)
    term.expect(f"created owner {EMAIL}")
    assert term.finish() == 0
    assert GOOD not in term.seen and "short" not in term.seen  # nothing typed was echoed
    stored = stored_hash(data_dir)
    assert stored is not None and verify_password(stored, GOOD)
    async with running_site(data_dir) as site, site.client() as client:
        assert (await sign_in(client, EMAIL, GOOD)).status_code == 303
        assert EMAIL in (await client.get("/")).text


@pytest.mark.req("run:cli", "gw:signin")
def test_owner_create_on_a_terminal_without_a_password_prints_a_one_time_link(data_dir: Path) -> None:
    term = on_terminal(
        "owner", "create", EMAIL, "--data-dir", str(data_dir), "--url", "http://127.0.0.1:8123"
    )
    term.expect("(Enter for none): ")
    term.type("")
    shown = term.expect("works once")
    assert term.finish() == 0
    assert "http://127.0.0.1:8123/reset/" in shown
    assert stored_hash(data_dir) is None


@pytest.mark.req("run:cli", "gw:signin")
def test_set_password_asks_on_a_terminal_and_gives_up_after_three_tries(data_dir: Path) -> None:
    assert almanac("owner", "create", EMAIL, "--data-dir", str(data_dir)).returncode == 0
    term = on_terminal("owner", "set-password", EMAIL, "--data-dir", str(data_dir))
    for _ in range(3):
        term.expect(f"New password for {EMAIL}: ")
        term.type("x")
        term.expect("Type it again: ")
        term.type("y")
    term.expect("no password set after 3 tries; nothing was changed")
    assert term.finish() == 1 and stored_hash(data_dir) is None
    term = on_terminal("owner", "set-password", EMAIL, "--data-dir", str(data_dir))
    term.expect(f"New password for {EMAIL}: ")
    term.type(GOOD)
    term.expect("Type it again: ")
    term.type(GOOD)
    term.expect(f"set the password of {EMAIL}")
    assert term.finish() == 0 and GOOD not in term.seen
    stored = stored_hash(data_dir)
    assert stored is not None and verify_password(stored, GOOD)


@pytest.mark.req("run:cli", "gw:signin")
def test_passwords_from_stdin_need_the_flag_and_follow_the_same_rules(data_dir: Path) -> None:
    d = str(data_dir)
    assert almanac("owner", "create", EMAIL, "--data-dir", d, "--password-stdin", stdin="").returncode == 1
    short = almanac("owner", "create", EMAIL, "--data-dir", d, "--password-stdin", stdin="9 chars!!\n")
    assert short.returncode == 1 and f"at least {MIN_PASSWORD} characters" in short.stderr
    assert "created" not in short.stderr
    made = almanac("owner", "create", EMAIL, "--data-dir", d, "--password-stdin", stdin="from a script 1\n")
    assert made.returncode == 0, made.stderr
    refused = almanac("owner", "set-password", EMAIL, "--data-dir", d, stdin="from a script 2\n")
    assert refused.returncode == 1 and "pass --password-stdin" in refused.stderr
    stored = stored_hash(data_dir)
    assert stored is not None and verify_password(stored, "from a script 1")
    for password, code in (("x" * (MIN_PASSWORD - 1), 1), ("y" * MIN_PASSWORD, 0)):
        done = almanac(
            "owner", "set-password", EMAIL, "--data-dir", d, "--password-stdin", stdin=password + "\n"
        )
        assert done.returncode == code, done.stderr
    stored = stored_hash(data_dir)
    assert stored is not None and verify_password(stored, "y" * MIN_PASSWORD)
    unknown = almanac(
        "owner", "set-password", "nobody@example.com", "--data-dir", d, "--password-stdin", stdin=GOOD
    )
    assert unknown.returncode == 1 and "no owner with email" in unknown.stderr


@pytest.mark.req("run:cli", "gw:signin")
def test_reset_link_prints_only_the_link_and_needs_a_known_address(data_dir: Path) -> None:
    d = str(data_dir)
    assert almanac("owner", "create", EMAIL, "--data-dir", d).returncode == 0
    made = almanac("owner", "reset-link", EMAIL, "--data-dir", d, "--url", "https://mem.example.org/")
    assert made.returncode == 0, made.stderr
    (line,) = made.stdout.splitlines()
    assert line.startswith("https://mem.example.org/reset/") and len(line.rsplit("/", 1)[1]) >= 43
    assert "works once" in made.stderr
    until = datetime.fromisoformat(made.stderr.rsplit("until ", 1)[1].strip().replace("Z", "+00:00"))
    assert timedelta(hours=23, minutes=55) < until - datetime.now(UTC) <= timedelta(hours=24)
    default = almanac("owner", "reset-link", EMAIL, "--data-dir", d)
    assert default.stdout.startswith("http://127.0.0.1:8080/reset/")  # the default host and port
    bad = almanac("owner", "reset-link", EMAIL, "--data-dir", d, "--url", "mem.example.org")
    assert bad.returncode == 1 and "must start with http://" in bad.stderr
    assert almanac("owner", "reset-link", EMAIL, "--data-dir", d, "--hours", "999").returncode == 2
