"""Fixtures for the web pages: a gateway serving real HTTP on port 0 (in this process for HTTP
tests, as its own process for the browser), and a real headless Chromium page."""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from playwright.sync_api import Page, Playwright, sync_playwright

from gateway.app import create_app
from gateway.control.store import ControlPlane
from tests.gateway.conftest import make_settings
from tests.gateway.e2e import Gateway, start_gateway
from tests.gateway.inproc import serving
from tests.gateway.web.browser import launch

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token a page put in its forms."""
    found = _CSRF.search(html)
    assert found is not None, "the page has no form with a csrf_token"
    return found.group(1)


@dataclass
class Site:
    """A gateway serving HTTP in this process; ``store`` is its control plane."""

    url: str
    store: ControlPlane

    def client(self, address: str | None = None) -> httpx.AsyncClient:
        """A browser-like client: keeps cookies, does not follow redirects. ``address``: connect
        from this loopback address (``127.0.0.2``…), as another machine would from its own."""
        transport = httpx.AsyncHTTPTransport(local_address=address) if address else None
        return httpx.AsyncClient(
            base_url=self.url, timeout=30, headers={"Accept": "text/html"}, transport=transport
        )


@asynccontextmanager
async def running_site(data_dir: Path, **settings: Any) -> AsyncIterator[Site]:
    app = create_app(make_settings(data_dir, engine_warm_spare=False, **settings))
    async with serving(app, lifespan="on") as url:
        yield Site(url, app.state.components.store)


@contextmanager
def site_in_thread(data_dir: Path, **settings: Any) -> Iterator[Site]:
    """:func:`running_site` on its own thread and event loop, for a browser test that needs the
    gateway in this process (to reach a seam in it) while Playwright's sync API runs here."""
    ready: queue.Queue[Site | BaseException] = queue.Queue()
    stop = threading.Event()

    async def serve() -> None:
        try:
            async with running_site(data_dir, **settings) as site:
                ready.put(site)
                await anyio.to_thread.run_sync(stop.wait)
        except BaseException as exc:
            ready.put(exc)
            raise

    thread = threading.Thread(target=anyio.run, args=(serve,), name="site", daemon=True)
    thread.start()
    started = ready.get(timeout=120)
    if isinstance(started, BaseException):
        raise started
    try:
        yield started
    finally:
        stop.set()
        thread.join(timeout=60)


@pytest.fixture
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture
def page(playwright: Playwright, tmp_path: Path) -> Iterator[Page]:
    """A page in a fresh headless Chromium (its own profile directory)."""
    context = launch(playwright, tmp_path / "chromium-profile")
    try:
        yield context.pages[0] if context.pages else context.new_page()
    finally:
        context.close()


@pytest.fixture
def start_site(tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    """Start a gateway process on port 0 with the given settings (stopped after the test)."""
    started: list[Gateway] = []

    def start(**settings: str) -> Gateway:
        n = len(started)
        values = {"engine_warm_spare": "false", "engine_start_timeout": "30", **settings}
        gateway = start_gateway(tmp_path / f"site{n}", tmp_path / f"site{n}.log", **values)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop()


@pytest.fixture
def site(start_site: Callable[..., Gateway]) -> Gateway:
    """A gateway process with default settings."""
    return start_site()
