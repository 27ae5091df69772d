"""The gateway's fork server (``python -m engine --fork-server``): one warm engine that forks the rest.

Importing the engine's libraries is most of an engine's start. The fork server does it once, then
waits on stdin for assignments, the warm spare's JSON lines ``{"socket": …, "dir": …, "log": …}``,
one per workspace to start. For each it ``fork()``s a child that becomes that workspace's engine
(it goes on from :func:`serve` to open the workspace and serve its socket, like any engine), while
the template stays as it was, ready for the next. Its replies, one JSON line each on stdout:

    {"ready": true}                         warmed up, taking assignments
    {"pid": N}                              an assignment's engine (in the order they came)
    {"error": "…"}                          an assignment refused (the gateway starts it cold)
    {"exit": N, "returncode": R}            engine N exited (R: the exit status, or -signal)

The gateway is not the engines' parent, so the template reaps them and reports their exits. End
of input (the gateway stopping it, or gone) ends the template; its engines are not stopped with
it: each watches the gateway itself (:func:`engine.lifeline.watch_pidfd`).

``fork()`` copies only the calling thread: a thread the template ran (a BLAS pool, a watcher) would
be missing in the child with whatever locks it held. So the template runs no thread of its own
(``engine.__main__`` keeps OpenBLAS to the calling thread; its lifeline is its input, not a
thread) and refuses an assignment if a library started one anyway.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

#: The longest assignment line read (paths only; anything longer is refused unread).
MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class Assignment:
    socket: str
    dir: str
    log: str | None


def parse(line: bytes) -> Assignment:
    """An assignment line; raises ValueError saying what is wrong with it."""
    try:
        found = json.loads(line)
        log = found.get("log")
        return Assignment(str(found["socket"]), str(found["dir"]), None if log is None else str(log))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"bad assignment line ({exc}); expected {{socket, dir, log}}") from None


def threads() -> int:
    """This process's threads, as the kernel counts them (Linux ``/proc``)."""
    return len(os.listdir("/proc/self/task"))


def gateway_pidfd(parent: int) -> int | None:
    """A pidfd of the process that started this one (the gateway), for the engines' lifeline; None
    when it is already gone."""
    fd = os.pidfd_open(parent)
    if os.getppid() != parent:  # it died before the pidfd was opened: fd may name another process
        os.close(fd)
        return None
    return fd


class Template:
    """The fork server's loop: assignments in, forks and exits reported out."""

    def __init__(self, wire: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, int] = {}  # pidfd -> pid
        self.pending = b""
        self.wire = wire

    def reply(self, message: dict[str, object]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.wire, data) :]

    def run(self, become: Callable[[Assignment], None]) -> bool:
        """Serve until end of input (False); True in a forked child, once ``become`` has run."""
        self.selector.register(0, selectors.EVENT_READ)
        self.reply({"ready": True})
        while True:
            for key, _ in self.selector.select():
                if key.fd == 0:
                    chunk = os.read(0, MAX_LINE)
                    if not chunk:
                        return False
                    if self.assignments(chunk, become):
                        return True
                else:
                    self.reap(key.fd)

    def assignments(self, chunk: bytes, become: Callable[[Assignment], None]) -> bool:
        self.pending += chunk
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            if line.strip() and self.fork(line, become):
                return True
        if len(self.pending) > MAX_LINE:
            self.pending = b""
            self.reply({"error": f"an assignment line longer than {MAX_LINE} bytes"})
        return False

    def fork(self, line: bytes, become: Callable[[Assignment], None]) -> bool:
        try:
            assignment = parse(line)
        except ValueError as exc:
            self.reply({"error": str(exc)})
            return False
        if (count := threads()) != 1:
            self.reply({"error": f"the fork server runs {count} threads; it forks only with one"})
            return False
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.leave()
            become(assignment)
            return True
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = pid
        self.selector.register(pidfd, selectors.EVENT_READ)
        self.reply({"pid": pid})
        return False

    def reap(self, pidfd: int) -> None:
        pid = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        self.reply({"exit": pid, "returncode": os.waitstatus_to_exitcode(status)})

    def leave(self) -> None:
        """In a forked child: drop what belongs to the template (its loop, its siblings' pidfds)."""
        self.selector.close()
        os.close(self.wire)
        for pidfd in self.children:
            os.close(pidfd)
        self.children.clear()


def become(assignment: Assignment) -> None:
    """In a forked child: take what an engine started for this workspace would have of its own.
    Signal dispositions go back to a fresh interpreter's (the server sets its own), stdin is
    nothing (the template's assignments are not the child's), stdout and stderr go to the log
    (the template's replies are not the child's either)."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if assignment.log:
        fd = os.open(assignment.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    else:
        fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # ``random`` reseeds itself after a fork (os.register_at_fork); numpy's global generator would
    # not, so it is reseeded here when loaded (the engine does not use it, a library might)
    if "numpy.random" in sys.modules:
        with contextlib.suppress(Exception):
            sys.modules["numpy.random"].seed()


def serve(become_engine: Callable[[Assignment], None]) -> bool:
    """Run the fork server (the caller has warmed up); False when its input ends, True in a forked
    child after ``become_engine`` (it then serves its workspace)."""
    gc.collect()
    gc.freeze()  # the warm objects stay out of every child's collections: their pages stay shared
    # the replies get stdout's pipe to themselves; anything a library prints goes to the log
    wire = os.dup(1)
    os.dup2(2, 1)
    return Template(wire).run(become_engine)
