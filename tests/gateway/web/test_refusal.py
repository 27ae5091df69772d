"""The words of the page a browser sees for a refused ``/authorize`` (RFC 6749 §4.1.2.1)."""

from __future__ import annotations

from gateway.web.refusal import explained


def test_a_refusal_page_explains_the_error_in_words() -> None:
    page = explained("invalid_request", "redirect_uri 'x' is not one this client registered")
    assert page.title == "This sign-in link is not valid"
    assert page.message.startswith(
        "redirect_uri 'x' is not one this client registered. Nothing was connected."
    )
    assert explained("something_new", "").message.startswith("Nothing was connected.")
