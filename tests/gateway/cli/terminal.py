"""A command run on a real pseudo-terminal (``pty``), driven like a person at a keyboard: wait for
what it prints (bounded), then type. The child's controlling terminal is the pty, so ``getpass``
reads and writes there exactly as in a shell."""

from __future__ import annotations

import os
import pty
import select
import time
from collections.abc import Mapping, Sequence


class Terminal:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: become the command (nothing else runs here)
            try:
                os.execve(argv[0], list(argv), dict(env))
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.seen = ""  # everything the terminal showed so far
        self._unread = ""
        self.status: int | None = None

    def _read(self, deadline: float) -> bool:
        """Read what is there (waiting at most until ``deadline``); False once the child closed it."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 4096).decode("utf-8", "replace")
        except OSError:  # EIO: the child is gone and the terminal closed
            return False
        if not chunk:
            return False
        self.seen += chunk
        self._unread += chunk
        return True

    def expect(self, text: str, timeout: float = 60.0) -> str:
        """Wait until ``text`` is shown; return what was shown up to and including it."""
        deadline = time.monotonic() + timeout
        while text not in self._unread:
            if time.monotonic() > deadline or not self._read(deadline):
                raise AssertionError(f"the terminal never showed {text!r}; it showed:\n{self.seen}")
        before, _, after = self._unread.partition(text)
        self._unread = after
        return before + text

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode("utf-8"))

    def finish(self, timeout: float = 60.0) -> int:
        """Read to the end and return the exit status."""
        deadline = time.monotonic() + timeout
        while self._read(deadline):
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                raise AssertionError(f"the command did not end within {timeout} s; it showed:\n{self.seen}")
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.status = os.waitstatus_to_exitcode(status)
        return self.status
