"""An engine the gateway started stops with it (``--exit-with-parent``).

Engines run in their own session, so when the gateway is killed outright (SIGKILL, OOM) nothing
tells them; they would keep the workspace lock and the next gateway could not start them again.
A small thread notices that the parent process changed (the engine was re-parented) and sends
the engine its own SIGTERM: the same clean stop as when the gateway asks, writes in flight
finished first.
"""

from __future__ import annotations

import os
import select
import signal
import threading

POLL_SECONDS = 0.25


def watch_parent(parent: int, *, interval: float = POLL_SECONDS) -> threading.Thread:
    """Start a daemon thread that SIGTERMs this process once its parent is no longer ``parent``."""

    def run() -> None:
        stopped = threading.Event()
        while not stopped.wait(interval):
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    thread = threading.Thread(target=run, name="almanac-lifeline", daemon=True)
    thread.start()
    return thread


def watch_pidfd(pidfd: int) -> threading.Thread:
    """Start a daemon thread that SIGTERMs this process once the process ``pidfd`` names exits
    (an engine forked by the fork server watches the gateway itself, not its parent, the template:
    it outlives a template that dies, and stops with the gateway)."""

    def run() -> None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while not poller.poll():
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=run, name="almanac-lifeline", daemon=True)
    thread.start()
    return thread
