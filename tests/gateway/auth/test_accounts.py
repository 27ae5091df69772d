"""The pure account rules (``gw:signin``): where a sign-in may go next, throttling, cookies."""

from __future__ import annotations

import pytest

from gateway.auth import accounts, passwords
from gateway.control.accounts import account_key
from gateway.errors import InvalidPassword


@pytest.mark.req("gw:signin", "sec:authz")
@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        ("/", "/"),
        ("/authorize?client_id=x&state=y", "/authorize?client_id=x&state=y"),
        (None, "/"),
        ("", "/"),
        ("//evil.example", "/"),
        ("/\\evil.example", "/"),
        ("/\\/evil.example", "/"),
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("evil.example", "/"),
        ("/x\r\nSet-Cookie: a=b", "/"),
        ("/ok\tnot", "/"),
    ],
)
def test_safe_next_keeps_the_browser_on_this_site(candidate: str | None, expected: str) -> None:
    assert accounts.safe_next(candidate) == expected


@pytest.mark.req("gw:signin")
def test_throttled_names_the_limit_reached() -> None:
    policy = accounts.ThrottlePolicy(per_account=5, per_address=20, window=900, per_account_total=100)

    def over(pair: int, address: int, account: int, known: bool = False) -> str | None:
        return accounts.throttled(
            policy,
            pair_failures=pair,
            address_failures=address,
            account_failures=account,
            known_address=known,
        )

    assert over(4, 19, 99) is None
    assert over(5, 5, 5) == "account"  # this email from this address only
    assert over(0, 20, 0) == "address"
    assert over(0, 0, 100) == "account_total" and over(0, 0, 100, known=True) is None
    assert accounts.pair_key("Ada@example.com", "10.0.0.1") == "account:ada@example.com|address:10.0.0.1"
    assert account_key(" Ada@Example.com ") == "account:ada@example.com"


@pytest.mark.req("gw:signin")
@pytest.mark.parametrize(
    ("public_url", "host", "secure"),
    [
        (None, "127.0.0.1", False),
        (None, "localhost", False),
        (None, "0.0.0.0", True),  # every interface: perhaps behind a TLS proxy
        (None, "::", True),
        (None, "10.0.0.5", True),
        ("http://localhost:8080", "0.0.0.0", False),
        ("http://127.0.0.1:8080", "127.0.0.1", False),
        ("https://mem.example.com", "127.0.0.1", True),
        ("http://mem.example.com", "0.0.0.0", True),
    ],
)
def test_cookies_are_secure_unless_plain_http_on_this_machine(
    public_url: str | None, host: str, secure: bool
) -> None:
    assert accounts.default_cookie_secure(public_url, host) is secure
    assert accounts.cookie_name("s", secure=secure) == ("__Host-s" if secure else "s")


@pytest.mark.req("gw:signin")
def test_new_passwords_are_checked() -> None:
    assert passwords.check_new_password("0123456789", "0123456789") == "0123456789"
    with pytest.raises(InvalidPassword, match="differ"):
        passwords.check_new_password("0123456789", "0123456788")
    with pytest.raises(InvalidPassword, match="at least 10"):
        passwords.check_new_password("short", "short")
    with pytest.raises(InvalidPassword, match="at most 1024"):
        passwords.check_password("x" * 1025)
    assert passwords.check_password("x" * 1024) == "x" * 1024
