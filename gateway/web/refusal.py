"""``/authorize`` refusals a person sees. Where RFC 6749 §4.1.2.1 forbids redirecting (an unknown
client, a redirect URI it did not register) the authorization server "SHOULD inform the resource
owner": a browser (``Accept: text/html``) gets a page saying what went wrong and what to do, any
other caller the JSON error it always got. Errors the spec sends back to the client by redirect
are untouched.

:func:`explained` is pure (the JSON error → the page's words); :func:`for_browser` is the shell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from gateway.web.render import render


@dataclass(frozen=True)
class Explained:
    title: str
    message: str


_TITLES = {
    "invalid_client": "This app is not known here",
    "invalid_request": "This sign-in link is not valid",
    "unauthorized_client": "This app may not sign in here",
    "unsupported_response_type": "This sign-in link is not valid",
    "invalid_scope": "This sign-in link asks for something this server does not give",
    "invalid_target": "This sign-in link is for another server",
}
_WHAT_TO_DO = (
    "Nothing was connected. Go back to your AI client and add this server again; if it keeps "
    "failing, remove the connector there and add it anew."
)


def explained(error: str, description: str) -> Explained:
    """The page for an ``/authorize`` error the spec does not redirect."""
    title = _TITLES.get(error, "This sign-in did not work")
    detail = description.strip().rstrip(".")
    message = f"{detail}. {_WHAT_TO_DO}" if detail else _WHAT_TO_DO
    return Explained(title, message)


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def for_browser(request: Request, response: Response) -> Response:
    """``response`` itself, unless it is a JSON error for a browser: then the page explaining it."""
    if response.status_code < 400 or not wants_html(request):
        return response
    if not response.headers.get("content-type", "").startswith("application/json"):
        return response
    try:
        body = json.loads(bytes(response.body))
    except ValueError:
        return response
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return response
    page = explained(body["error"], str(body.get("error_description") or ""))
    return render(
        request,
        "error.html",
        status_code=response.status_code,
        title=page.title,
        message=page.message,
        back="/",
    )
