"""An in-memory copy of one vector table, for nearest-neighbour search with numpy.

sqlite-vec's ``vec0`` stays the durable copy; searching it is a brute-force scan that reads and
decodes every vector from SQLite on each query (≈ 3 ms at 2,000 vectors, ≈ 130 ms at 100,000,
notes/stack.md §5). :class:`VectorMatrix` keeps the same vectors in a numpy matrix, loaded on
the first search and then kept in step row by row (:meth:`upsert` / :meth:`remove`), so a query
is one matrix–vector product:

- up to :data:`EXACT_ROWS` vectors: float32, exact cosine (the vectors are L2-normalised, so a
  dot product is the cosine);
- beyond that: one bit per dimension (the sign) as a prefilter — Hamming distance over packed
  bits, the nearest ``max(k × OVERSAMPLE, MIN_SHORTLIST)`` kept — then those rescored exactly
  from a float16 copy. 100,000 × 384 dimensions take ≈ 80 MB instead of 154 MB, and a search
  takes a few milliseconds instead of tens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

F32 = np.dtype(np.float32)
EXACT_ROWS = 25_000
OVERSAMPLE = 8
MIN_SHORTLIST = 400
_SPARE = 64

Array = np.ndarray[Any, Any]


def unit(vector: Array) -> Array:
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


#: How much a chunk's own words weigh in its stored vector against its words with their neighbours
#: (:func:`contextual_vector`; measured on LoCoMo's dev halves, docs/recall.md).
OWN_WEIGHT = 0.5


def contextual_vector(own: Array, context: Array, weight: float = OWN_WEIGHT) -> Array:
    """The vector stored for a chunk: the unit mean of its own words' vector and the vector of its
    words read with their neighbours (``previous \n text \n next``), ``weight`` on its own words.

    Its cosine to a query is high when either reading is close to it, so a memory matches by what
    it says ("I signed up for a pottery class") and by the exchange it was said in. A chunk without
    neighbours embeds one text: pass the same vector twice (the result is that vector, unit)."""
    a, b = unit(own), unit(context)
    return unit(weight * a + (1.0 - weight) * b)


def _pack(rows: Array) -> Array:
    """The signs of ``rows`` (n × dim, or one vector) as 64-bit words, one column per row
    (words × n): the Hamming distance of a query to every row is then a few passes over
    contiguous words — 1.3 ms at 100,000 × 384 against 10.6 ms over the bytes of each row."""
    packed = np.atleast_2d(np.packbits(rows > 0, axis=-1))
    spare = -packed.shape[1] % 8
    if spare:
        packed = np.pad(packed, ((0, 0), (0, spare)))
    return np.ascontiguousarray(packed.view(np.uint64).T)


class VectorMatrix:
    """Rowid → unit vector, searchable by cosine similarity (see the module docstring)."""

    def __init__(self, dim: int, *, exact_rows: int = EXACT_ROWS) -> None:
        self.dim = dim
        self.exact_rows = exact_rows
        self.quantized = False
        self._pos: dict[int, int] = {}
        self._ids = np.full(_SPARE, -1, dtype=np.int64)
        self._mat: Array = np.zeros((_SPARE, dim), dtype=np.float32)
        self._bits: Array = np.zeros(((dim + 63) // 64, 0), dtype=np.uint64)  # words × rows
        self._n = 0  # rows in use (live or dead)

    def __len__(self) -> int:
        return len(self._pos)

    # -- keeping it in step ---------------------------------------------------------------------

    def load(self, rows: Iterable[tuple[int, bytes]]) -> None:
        """Replace everything with ``(rowid, float32 blob)`` rows."""
        ids, blobs = [], []
        for rowid, blob in rows:
            ids.append(int(rowid))
            blobs.append(blob)
        mat = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), self.dim).astype(np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        mat = np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)
        self.quantized = False
        self._pos = {rowid: i for i, rowid in enumerate(ids)}
        self._ids = np.array(ids, dtype=np.int64)
        self._mat = mat
        self._n = len(ids)
        self._settle()

    def upsert(self, rowid: int, vector: Array) -> None:
        v = unit(vector)
        at = self._pos.get(rowid)
        if at is None:
            if self._n == len(self._ids):
                self._grow()
            at = self._n
            self._n += 1
            self._pos[rowid] = at
            self._ids[at] = rowid
        self._mat[at] = v.astype(self._mat.dtype)
        if self.quantized:
            self._bits[:, at] = _pack(v)[:, 0]
        if not self.quantized and len(self._pos) > self.exact_rows:
            self._settle()

    def remove(self, rowid: int) -> None:
        at = self._pos.pop(rowid, None)
        if at is None:
            return
        self._ids[at] = -1
        if self._n - len(self._pos) > max(len(self._pos), _SPARE):
            self._compact()

    def get(self, rowid: int) -> Array | None:
        at = self._pos.get(rowid)
        return None if at is None else self._mat[at].astype(np.float32)

    def _grow(self) -> None:
        size = max(len(self._ids) * 2, _SPARE)
        ids = np.full(size, -1, dtype=np.int64)
        ids[: self._n] = self._ids[: self._n]
        mat = np.zeros((size, self.dim), dtype=self._mat.dtype)
        mat[: self._n] = self._mat[: self._n]
        self._ids, self._mat = ids, mat
        if self.quantized:
            bits = np.zeros((self._bits.shape[0], size), dtype=np.uint64)
            bits[:, : self._n] = self._bits[:, : self._n]
            self._bits = bits

    def _compact(self) -> None:
        keep = np.flatnonzero(self._ids[: self._n] >= 0)
        self._ids, self._mat = self._ids[keep], self._mat[keep]
        if self.quantized:
            self._bits = np.ascontiguousarray(self._bits[:, keep])
        self._n = len(keep)
        self._pos = {int(rowid): i for i, rowid in enumerate(self._ids)}

    def _settle(self) -> None:
        """Switch to bits + float16 once there are more than ``exact_rows`` vectors."""
        if self.quantized or len(self._pos) <= self.exact_rows:
            return
        self._compact()
        self.quantized = True
        self._bits = _pack(self._mat)
        self._mat = self._mat.astype(np.float16)

    # -- searching -------------------------------------------------------------------------------

    def knn(self, query: Array, k: int) -> list[tuple[int, float]]:
        """``(rowid, cosine)`` of the ``k`` nearest vectors, nearest first."""
        if not self._pos or k <= 0:
            return []
        q = unit(query)
        ids = self._ids[: self._n]
        if self.quantized:
            distance = np.zeros(self._n, dtype=np.int32)
            for words, word in zip(self._bits[:, : self._n], _pack(q)[:, 0], strict=True):
                distance += np.bitwise_count(np.bitwise_xor(words, word))
            distance[ids < 0] = np.iinfo(np.int32).max
            m = min(self._n, max(k * OVERSAMPLE, MIN_SHORTLIST))
            rows = np.argpartition(distance, m - 1)[:m] if m < self._n else np.arange(self._n)
            rows = rows[ids[rows] >= 0]
            scores = self._mat[rows].astype(np.float32) @ q
        else:
            scores = self._mat[: self._n] @ q
            scores[ids < 0] = -np.inf
            rows = np.arange(self._n)
        k = min(k, len(rows))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        order = top[np.lexsort((ids[rows[top]], -scores[top]))]
        found, cosines = ids[rows[order]].tolist(), scores[order].tolist()  # as Python ints / floats
        return [(r, c) for r, c in zip(found, cosines, strict=True) if r >= 0]

    def cosines(self, query: Array, rowids: Sequence[int]) -> dict[int, float]:
        """Cosine similarity of ``query`` to each of ``rowids`` that has a vector."""
        at = [(r, self._pos[r]) for r in rowids if r in self._pos]
        if not at:
            return {}
        rows = np.fromiter((p for _, p in at), dtype=np.int64, count=len(at))
        scores = self._mat[rows].astype(np.float32) @ unit(query)
        return {r: float(s) for (r, _), s in zip(at, scores, strict=True)}
