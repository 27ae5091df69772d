"""Launching the real headless browser: Debian's ``chromium`` driven by Playwright (installed by
``scripts/test-setup``; ``playwright install`` is never run and nothing is downloaded)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import anyio
from playwright.sync_api import BrowserContext, Playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


T = TypeVar("T")


def off_loop(fn: Callable[[], Awaitable[T]], *, timeout: float = 120) -> T:
    """Run an async function to completion from a browser test. Playwright's sync API keeps an
    event loop running in this thread, so the function gets its own thread and loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, fn).result(timeout=timeout)


def launch(playwright: Playwright, profile: Path, *, width: int = 1100, height: int = 760) -> BrowserContext:
    """A fresh Chromium (its own user-data directory ``profile``) with one context."""
    context = playwright.chromium.launch_persistent_context(
        str(profile),
        executable_path=CHROMIUM,
        headless=True,
        args=list(FLAGS),
        viewport={"width": width, "height": height},
        locale="en-US",
    )
    context.set_default_timeout(30_000)
    return context
