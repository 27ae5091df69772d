"""Progress and report lines for offline work: ``<what>: <line>`` on stderr, at most once a second."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

PROGRESS_EVERY_S = 1.0


def printer(out: TextIO, what: str) -> Callable[[str], None]:
    def say(line: str) -> None:
        print(f"{what}: {line}", file=out, flush=True)

    return say


def ticker(say: Callable[[str], None], total: int, verb: str) -> Callable[[int], None]:
    """``tick(done)``: says ``<verb> <done> of <total> files`` when a second has passed, and at the end."""
    last = [time.monotonic()]

    def tick(done: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            say(f"{verb} {done} of {total} files")

    return tick
