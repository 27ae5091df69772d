"""What the index reader keeps in memory between writes, safe for threads reading at once.

Each copy is told what a write changed only after the write committed (the writer calls
:meth:`~engine.index.reads.IndexReader.committed`), and each refills itself from SQLite on a
reading thread's connection, so it never holds a row a committed write has changed: a statement
that began after the commit reads the commit. The copies:

- :class:`UntilWrite` — answers kept until the writer's next commit, tagged with the commit count
  they were read at (swapped whole, so no thread sees a tag with another count's answers);
- :class:`KeptVectors` — the vector tables as numpy matrices, each behind a lock of its own held
  while it is searched or brought up to date (a search is one matrix product);
- :class:`KeptGroups` — each session's row id and mean vector, behind one lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from engine.index.vectors import VectorMatrix

Vectors = dict[int, np.ndarray[Any, np.dtype[np.float32]]]
Group = tuple[int, np.ndarray[Any, Any] | None]
TABLES = ("chunks", "facts")

K = TypeVar("K")
V = TypeVar("V")


class UntilWrite(Generic[K, V]):
    """A dict kept until the index's next write: :meth:`fresh` returns it empty again whenever
    the writer's commit count has moved since it was filled (or it holds ``most`` entries).

    The count and the dict are one tuple, replaced whole: a thread asking with count ``n`` gets a
    dict only ever filled by threads that asked with ``n``, that is, that read after commit ``n``."""

    def __init__(self, most: int | None = None) -> None:
        self.most = most
        self._kept: tuple[int, dict[K, V]] = (-1, {})

    def fresh(self, changes: int) -> dict[K, V]:
        kept = self._kept
        if kept[0] != changes or (self.most is not None and len(kept[1]) >= self.most):
            kept = self._kept = (changes, {})
        return kept[1]

    def __len__(self) -> int:
        return len(self._kept[1])


class KeptVectors:
    """``vec_chunks`` and ``vec_facts`` as :class:`~engine.index.vectors.VectorMatrix` copies:
    loaded on first use, then kept in step with the rows each committed write touched."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._locks = {table: threading.Lock() for table in TABLES}
        self._matrices: dict[str, VectorMatrix] = {}
        self._mutex = threading.Lock()  # the writer's hand-over: never held while reading
        self._touched: dict[str, set[int]] = {table: set() for table in TABLES}

    def committed(self, touched: dict[str, set[int]]) -> None:
        """A committed write changed (or removed) the vectors of these rowids."""
        with self._mutex:
            for table, rowids in touched.items():
                self._touched[table].update(rowids)

    def forget(self) -> None:
        """Drop every copy: the next use loads the table again."""
        with self._locks["chunks"], self._locks["facts"], self._mutex:
            self._matrices.clear()
            for touched in self._touched.values():
                touched.clear()

    def _take(self, table: str) -> list[int]:
        with self._mutex:
            ids = list(self._touched[table])
            self._touched[table].clear()
        return ids

    @contextlib.contextmanager
    def matrix(
        self,
        table: str,
        load: Callable[[], Iterable[tuple[int, bytes]]],
        read: Callable[[list[int]], Vectors],
    ) -> Iterator[VectorMatrix]:
        """``table``'s matrix, up to date and held for this block: ``load()`` gives every
        ``(rowid, blob)`` on first use, ``read(ids)`` the vectors now stored for ``ids``."""
        with self._locks[table]:
            matrix = self._matrices.get(table)
            if matrix is None:
                self._take(table)  # before the load: a commit after it is taken next time
                matrix = VectorMatrix(self.dim)
                matrix.load(load())
                self._matrices[table] = matrix
            elif ids := self._take(table):
                now = read(ids)
                for rowid in ids:
                    vec = now.get(rowid)
                    if vec is None:
                        matrix.remove(rowid)
                    else:
                        matrix.upsert(rowid, vec)
            yield matrix


class KeptGroups:
    """``key → (rowid, unit mean vector or None)`` of every session, re-read for the keys each
    committed write touched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, Group] | None = None
        self._mutex = threading.Lock()  # the writer's hand-over: never held while reading
        self._touched: set[str] = set()

    def committed(self, keys: Iterable[str]) -> None:
        with self._mutex:
            self._touched.update(keys)

    def forget(self) -> None:
        with self._lock:
            self._kept = None

    def get(
        self, keys: Sequence[str], read: Callable[[Sequence[str] | None], dict[str, Group]]
    ) -> dict[str, Group]:
        """The groups ``keys`` that exist; ``read(keys)`` reads them (None: every group)."""
        with self._lock:
            with self._mutex:
                stale = sorted(self._touched)
                self._touched.clear()
            kept = self._kept
            if kept is None:
                kept = self._kept = read(None)
            elif stale:
                for key in stale:
                    kept.pop(key, None)
                kept.update(read(stale))
            return {k: kept[k] for k in keys if k in kept}
