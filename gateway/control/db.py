"""The control plane's database connection: SQLite (apsw, the embedded default) or PostgreSQL
(psycopg 3, ``database_url = "postgresql://…"``), behind one small interface.

The queries are written once, in the SQL both dialects share, with ``?`` placeholders; the
PostgreSQL side rewrites them to psycopg's ``%s``. Statements outside :meth:`Database.transaction`
commit on their own. A transaction is bound to the thread that opened it: every statement that
thread runs inside it uses the same connection (nested blocks become savepoints), while other
threads use their own (PostgreSQL: from a pool) or wait their turn (SQLite: one connection, one
writer at a time). Results are fetched whole, so nothing holds a connection after a call returns.

Races between gateways are settled in the SQL itself: a single-use row (an invite, an
authorization code, a refresh token) is spent with ``UPDATE … WHERE <still unspent>`` and the
caller checks :attr:`Rows.rowcount`, which both engines make atomic per row.

PostgreSQL down (``run:scale-out``): a call waits at most :data:`WAIT_S` seconds for a connection
and then raises :class:`~gateway.errors.ControlPlaneUnavailable` (503 ``control_plane_unavailable``
with ``Retry-After``); for :data:`BREAK_S` after that, calls fail at once instead of each waiting
again. The pool gives up a reconnection after :data:`RECONNECT_S` and starts a fresh one on the next
call, so service resumes within seconds of the server's return, by itself.
"""

from __future__ import annotations

import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import apsw

from gateway.errors import ControlPlaneUnavailable

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

Dialect = Literal["sqlite", "postgresql"]

#: The longest a call waits for a PostgreSQL connection before it is refused (seconds).
WAIT_S = 3.0
#: After a refusal, calls are refused at once for this long (seconds) rather than each waiting.
BREAK_S = 1.0
#: A reconnection attempt in the background is given up after this long, and begun again anew.
RECONNECT_S = 4.0
#: What a refused call is told to wait (``Retry-After``, seconds).
RETRY_AFTER_S = 2.0


class ConstraintViolation(Exception):
    """A UNIQUE / CHECK / foreign-key constraint refused a write (the transaction is rolled back)."""


class DatabaseUnavailable(Exception):
    """The database could not be reached or opened (the message says which and why)."""


@dataclass(frozen=True)
class Rows:
    """A statement's whole result: its rows and how many rows it changed."""

    rows: list[tuple[Any, ...]]
    rowcount: int

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self.rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows)


class Database(ABC):
    """What every control-plane query runs through; see the two subclasses."""

    dialect: Dialect

    @abstractmethod
    def execute(self, sql: str, params: Sequence[object] = ()) -> Rows:
        """One statement; inside the thread's transaction if it has one, else committed at once."""

    @abstractmethod
    def script(self, sql: str) -> None:
        """Several statements (a migration), inside the thread's transaction if it has one."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """All-or-nothing: committed at the end of the block, rolled back if it raises."""

    def clock(self) -> float:
        """The database's clock now (epoch seconds): the one clock every node of a cluster judges
        heartbeats, leases and signatures by (:mod:`gateway.cluster.dbclock`). PostgreSQL's
        ``clock_timestamp()`` (the time of the call, not of its transaction); an embedded SQLite
        file has no clock of its own: its one host's clock is the database's."""
        if self.dialect == "sqlite":
            return time.time()
        row = self.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert row is not None
        return float(row[0])

    @abstractmethod
    def close(self) -> None: ...


class SqliteDatabase(Database):
    """One apsw connection; a re-entrant lock keeps one thread's transaction whole."""

    dialect: Dialect = "sqlite"

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._lock = threading.RLock()

    def execute(self, sql: str, params: Sequence[object] = ()) -> Rows:
        with self._lock:
            try:
                cursor = self.conn.execute(sql, tuple(params))
                rows = [tuple(r) for r in cursor]
            except apsw.ConstraintError as exc:
                raise ConstraintViolation(str(exc)) from exc
            return Rows(rows, self.conn.changes())

    def script(self, sql: str) -> None:
        with self._lock:
            self.conn.execute(sql)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` at the top (the write lock is taken first, so two processes on one
        file wait for each other instead of failing to upgrade a read); a savepoint inside."""
        with self._lock:
            try:
                if self.conn.in_transaction:
                    with self.conn:
                        yield
                else:
                    with self.immediate():
                        yield
            except apsw.ConstraintError as exc:
                raise ConstraintViolation(str(exc)) from exc

    @contextmanager
    def immediate(self) -> Iterator[None]:
        """A top-level ``BEGIN IMMEDIATE`` transaction."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


@lru_cache(maxsize=512)
def to_pyformat(sql: str) -> str:
    """``?`` placeholders → psycopg's ``%s`` (a literal ``%`` doubled). The control plane's SQL has
    no ``?`` inside string literals, which this relies on."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDatabase(Database):
    """A psycopg connection pool (autocommit connections; a transaction borrows one for its span)."""

    dialect: Dialect = "postgresql"

    def __init__(self, pool: ConnectionPool[psycopg.Connection[Any]], url: str = "") -> None:
        self._pool = pool
        self._local = threading.local()
        self._url = url
        self._down_until = -1.0  # monotonic: refuse at once until then

    def _unavailable(self, exc: BaseException) -> ControlPlaneUnavailable:
        self._down_until = time.monotonic() + BREAK_S
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return ControlPlaneUnavailable(
            f"the control plane (PostgreSQL at {redact(self._url)}) cannot be reached now ({reason}); "
            "try again in a moment",
            retry_after=RETRY_AFTER_S,
        )

    def _gate(self) -> None:
        if time.monotonic() < self._down_until:
            raise ControlPlaneUnavailable(
                f"the control plane (PostgreSQL at {redact(self._url)}) cannot be reached now; "
                "try again in a moment",
                retry_after=RETRY_AFTER_S,
            )

    @classmethod
    def connect(cls, url: str, *, max_size: int = 8, timeout: float = 10.0) -> PostgresDatabase:
        import psycopg
        from psycopg_pool import ConnectionPool

        try:  # one direct attempt first: a wrong URL fails at once, with libpq's own reason
            psycopg.connect(url, connect_timeout=max(1, int(timeout))).close()
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())
            raise DatabaseUnavailable(
                f"cannot connect to the PostgreSQL control plane at {redact(url)}: {reason}"
            ) from None
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            timeout=WAIT_S,
            reconnect_timeout=RECONNECT_S,
            kwargs={"autocommit": True, "connect_timeout": 2},
            # no check on every checkout (a round trip per call): a statement that finds its idle
            # connection dropped is retried once on a fresh one, and a transaction checks first
            open=False,
            name="almanac-control",
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except Exception as exc:
            pool.close()
            reason = " ".join(str(exc).split())
            raise DatabaseUnavailable(
                f"cannot connect to the PostgreSQL control plane at {redact(url)}: {reason}"
            ) from None
        return cls(pool, url)

    def _current(self) -> psycopg.Connection[Any] | None:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        return conn

    def _run(self, conn: psycopg.Connection[Any], sql: str, params: Sequence[object]) -> Rows:
        import psycopg

        try:
            with conn.cursor() as cur:
                cur.execute(to_pyformat(sql), tuple(params))
                rows = [tuple(r) for r in cur.fetchall()] if cur.description is not None else []
                return Rows(rows, cur.rowcount)
        except psycopg.IntegrityError as exc:
            raise ConstraintViolation(str(exc).strip()) from exc

    def execute(self, sql: str, params: Sequence[object] = ()) -> Rows:
        conn = self._current()
        if conn is not None:
            return self._run(conn, sql, params)
        from psycopg_pool import PoolTimeout

        self._gate()
        try:
            return self._execute(sql, params)
        except PoolTimeout as exc:
            raise self._unavailable(exc) from None

    def _execute(self, sql: str, params: Sequence[object]) -> Rows:
        import psycopg

        for attempt in (1, 2):
            with self._pool.connection() as pooled:
                try:
                    return self._run(pooled, sql, params)
                except psycopg.OperationalError as exc:
                    # the server dropped this idle connection (a restart, a failover): the pool
                    # discards it (and checks the other idle ones), and the statement is tried
                    # once more on a fresh one
                    if not pooled.closed:
                        raise
                    if attempt == 2:
                        raise self._unavailable(exc) from None
            self._pool.check()
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _borrow_checked(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection known to be alive (one round trip to check), for a transaction."""
        import psycopg
        from psycopg_pool import ConnectionPool

        for attempt in (1, 2):
            with self._pool.connection() as pooled:
                try:
                    ConnectionPool.check_connection(pooled)
                except psycopg.OperationalError as exc:
                    if attempt == 2:
                        raise self._unavailable(exc) from None
                    dead = True  # the pool discards it on the way out
                else:
                    dead = False
                if not dead:
                    yield pooled
                    return
            self._pool.check()  # the other idle connections died with it: replace them too

    def script(self, sql: str) -> None:
        conn = self._current()
        if conn is None:
            from psycopg_pool import PoolTimeout

            try:
                with self._pool.connection() as pooled:
                    pooled.execute(sql.encode("utf-8"))
            except PoolTimeout as exc:
                raise self._unavailable(exc) from None
        else:
            conn.execute(sql.encode("utf-8"))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        import psycopg

        conn = self._current()
        if conn is not None:  # nested: a savepoint on the thread's connection
            try:
                with conn.transaction():
                    yield
            except psycopg.IntegrityError as exc:
                raise ConstraintViolation(str(exc).strip()) from exc
            return
        from psycopg_pool import PoolTimeout

        self._gate()
        try:
            with self._borrow_checked() as pooled:
                self._local.conn = pooled
                try:
                    with pooled.transaction():
                        yield
                except psycopg.IntegrityError as exc:
                    raise ConstraintViolation(str(exc).strip()) from exc
                except psycopg.OperationalError as exc:
                    if not pooled.broken and not pooled.closed:
                        raise
                    raise self._unavailable(exc) from None  # the server went away mid-transaction
                finally:
                    self._local.conn = None
        except PoolTimeout as exc:
            raise self._unavailable(exc) from None

    def close(self) -> None:
        self._pool.close()


def redact(url: str) -> str:
    """A connection URL without its password (for messages and logs)."""
    return _QUERY_PASSWORD.sub(r"\1***", _PASSWORD.sub(r"\1***@", url))


_PASSWORD = re.compile(r"^([a-z]+://[^:/@?#]*:)[^@/?#]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*")
