"""Recent query vectors: the last few query embeddings, keyed by (model id, exact query text).

An agent often asks ``get_context`` the same question on several turns of one conversation; the
second time, the query vector is taken from here instead of running the model again (a few
milliseconds of the hybrid search, ``perf:context-small``). Bounded by entry count (each vector is
``dim`` float32: 128 entries of 384 dimensions are under 200 KB); least recently used first out.
The key carries the embedder's model id, read on every call, so a vector of one model never
answers for another. Vectors are handed out read-only: they are shared between callers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

import numpy as np

from engine.embed.base import Embedder, Vector

DEFAULT_SIZE: Final = 128


class RecentQueries:
    """An LRU of query vectors in front of :meth:`Embedder.embed_query`. Thread-safe."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        if size < 0:
            raise ValueError("size must be 0 (no cache) or more")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[tuple[str, str], Vector] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, model_id: str, text: str) -> Vector | None:
        """The vector kept for ``text`` under ``model_id`` (counted as a hit), or None (not counted:
        :meth:`vector` counts the miss when it embeds)."""
        key = (model_id, text)
        with self._lock:
            found = self._vectors.get(key)
            if found is not None:
                self._vectors.move_to_end(key)
                self.hits += 1
            return found

    def vector(self, embedder: Embedder, text: str) -> Vector:
        """``embedder.embed_query(text)``, or the vector it gave for the same model and text lately.

        An embedding that fails is not remembered (its error reaches the caller)."""
        found = self.get(embedder.model_id, text)
        if found is not None:
            return found
        with self._lock:
            self.misses += 1
        vector = np.array(embedder.embed_query(text), dtype=np.float32)  # a copy of its own
        if self.size == 0:
            return vector
        vector.setflags(write=False)
        key = (embedder.model_id, text)  # as the embedder knows it now (a remote one may have just asked)
        with self._lock:
            self._vectors[key] = vector
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector
