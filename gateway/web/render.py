"""Rendering a page: :func:`render` fills a template from ``templates/`` with the request's CSRF
token and signed-in owner, and sets the headers every page carries (no caching, no framing, no
scripts from anywhere, no referrer leaking the path to other sites)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from gateway.auth.csrf import attach_presession, csrf_token
from gateway.auth.sessions import current

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"

CSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Forms post here only; a page whose form may end elsewhere (consent) names that place.
    "Content-Security-Policy": CSP + "; form-action 'self'",
}


def page_headers(form_action: tuple[str, ...] = ()) -> dict[str, str]:
    """:data:`PAGE_HEADERS`, with ``form_action`` sources allowed besides this origin (browsers
    check ``form-action`` on the redirects that follow a form's submission too)."""
    if not form_action:
        return PAGE_HEADERS
    sources = " ".join(("'self'", *form_action))
    return {**PAGE_HEADERS, "Content-Security-Policy": f"{CSP}; form-action {sources}"}


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render_text(request: Request, template: str, /, **context: Any) -> str:
    """``template`` rendered with ``context`` (any names, ``name`` included) plus ``csrf_token``,
    ``owner`` (the signed-in :class:`~gateway.auth.sessions.Session` or None) and ``path``."""
    values = {"csrf_token": csrf_token(request), "owner": current(request), "path": request.url.path}
    values.update(context)
    return _ENV.get_template(template).render(values)


def render(
    request: Request,
    template: str,
    /,
    status_code: int = 200,
    form_action: tuple[str, ...] = (),
    **context: Any,
) -> HTMLResponse:
    """:func:`render_text` as a page response with :func:`page_headers`."""
    html = render_text(request, template, **context)
    response = HTMLResponse(html, status_code=status_code, headers=page_headers(form_action))
    attach_presession(request, response)
    return response
