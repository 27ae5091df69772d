"""The index's read connections: a bounded pool, one connection lent to each reading thread.

SQLite in WAL mode lets any number of connections read at once, each from the last commit when
its statement began, while the writer's connection holds a transaction: no read waits for a write
or for another read's statement (apsw releases the interpreter lock inside SQLite). A thread that
reads is lent one connection for as long as it reads (:meth:`ReadConnections.lend`, re-entrant:
a read made within another uses the same connection), so a thread never holds two and a full
pool cannot deadlock. Connections are opened on first need, at most ``most`` of them; a thread
finding them all lent waits for one to come back.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import apsw


class ReadConnections:
    """At most ``most`` connections made by ``connect``, lent one per reading thread."""

    def __init__(self, connect: Callable[[], Any], most: int) -> None:
        if most < 1:
            raise ValueError(f"a reader needs at least one connection, not {most}")
        self.most = most
        self._connect = connect
        self._cond = threading.Condition()
        self._idle: list[Any] = []  # the most recently returned last: its pages are warm
        self._opened = 0  # opened or being opened
        self._closed = False
        self._here = threading.local()

    @property
    def opened(self) -> int:
        """How many connections are open (lent or idle)."""
        with self._cond:
            return self._opened

    @contextlib.contextmanager
    def lend(self) -> Iterator[Any]:
        """A connection for this thread until the block ends; within another ``lend`` on the same
        thread, the same connection."""
        held = getattr(self._here, "connection", None)
        if held is not None:
            yield held
            return
        connection = self._take()
        self._here.connection = connection
        try:
            yield connection
        finally:
            self._here.connection = None
            with self._cond:
                self._idle.append(connection)
                self._cond.notify_all()  # a thread waiting to borrow, or close() waiting for all

    def _take(self) -> Any:
        with self._cond:
            while True:
                if self._closed:
                    raise apsw.ConnectionClosedError("the index is closed")
                if self._idle:
                    return self._idle.pop()
                if self._opened < self.most:
                    self._opened += 1
                    break
                self._cond.wait()
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._opened -= 1
                self._cond.notify_all()
            raise

    def close(self) -> None:
        """Close every connection, once the lent ones are back; lending ends here."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()  # threads waiting for a connection stop waiting
            while len(self._idle) < self._opened:
                self._cond.wait()
            idle, self._idle, self._opened = self._idle, [], 0
        for connection in idle:
            connection.close()
