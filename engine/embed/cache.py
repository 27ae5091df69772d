"""The embedding cache: vectors keyed by (model id, sha256 of the text), outliving index rebuilds.

A SQLite file (through apsw, WAL mode) beside the index, never inside it: deleting and rebuilding
the index re-uses every vector already paid for. Each row keeps its model id and dimension, so
vectors of different models never mix (SPEC §8 ``embed:model-id``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import numpy as np

from engine.embed.base import Embedder, Matrix, Vector
from engine.embed.errors import CacheError

SCHEMA_VERSION: Final = 1
_CHUNK: Final = 500  # keys per SELECT, under SQLite's variable limit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embedding (
    model_id  TEXT    NOT NULL,
    text_hash BLOB    NOT NULL,  -- sha256 of the UTF-8 text
    dim       INTEGER NOT NULL,
    vector    BLOB    NOT NULL,  -- dim little-endian float32
    PRIMARY KEY (model_id, text_hash)
) WITHOUT ROWID;
"""


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingCache:
    """``(model_id, sha256(text)) → float32 vector`` in one SQLite file. Thread-safe."""

    def __init__(self, path: Path | str, *, busy_timeout_ms: int = 5000) -> None:
        import apsw

        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db: Any = apsw.Connection(str(self.path))
            self._db.set_busy_timeout(busy_timeout_ms)
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchall()[0][0]
            version = self._db.execute("PRAGMA user_version").fetchall()[0][0]
            if version not in (0, SCHEMA_VERSION):
                raise CacheError(
                    f"the embedding cache {self.path} has schema version {version}, this Almanac "
                    f"knows {SCHEMA_VERSION}; delete the file (it is only a cache) and start again"
                )
            with self._db:
                self._db.execute(_SCHEMA)
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except apsw.Error as exc:
            raise CacheError(
                f"cannot open the embedding cache {self.path} ({exc}); check the file's permissions, "
                "or delete it (it is only a cache)"
            ) from exc
        self.journal_mode = str(mode)

    def get_many(self, model_id: str, texts: Iterable[str]) -> dict[str, Vector]:
        """The cached vectors of ``texts`` for ``model_id``, by text; misses are absent."""
        by_hash = {text_hash(t): t for t in texts}
        keys = list(by_hash)
        found: dict[str, Vector] = {}
        with self._lock:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                sql = (
                    "SELECT text_hash, dim, vector FROM embedding"
                    f" WHERE model_id = ? AND text_hash IN ({marks})"
                )
                rows = self._db.execute(sql, (model_id, *chunk)).fetchall()
                for digest, dim, blob in rows:
                    if len(blob) == 4 * dim:  # a torn or foreign row is a miss, not an error
                        found[by_hash[bytes(digest)]] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return found

    def put_many(self, model_id: str, dim: int, items: Iterable[tuple[str, Vector]]) -> int:
        """Store ``(text, vector)`` pairs (replacing any earlier vector); returns how many."""
        rows = []
        for text, vector in items:
            v = np.asarray(vector)
            if v.shape != (dim,):
                raise ValueError(f"vector of shape {v.shape} does not match dim {dim} of {model_id}")
            rows.append((model_id, text_hash(text), dim, v.astype("<f4").tobytes()))
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO embedding VALUES (?, ?, ?, ?)", rows)
        return len(rows)

    def keep_only(self, texts: Iterable[str]) -> int:
        """Drop every vector whose text is not one of ``texts`` (any model), overwriting the freed
        bytes; returns how many were dropped. After a permanent deletion (``life:delete``) this
        leaves no vector computed from the deleted words."""
        keep = [(text_hash(t),) for t in set(texts)]
        with self._lock:
            self._db.execute("PRAGMA secure_delete=ON")
            with self._db:
                self._db.execute("CREATE TEMP TABLE IF NOT EXISTS keep (text_hash BLOB PRIMARY KEY)")
                self._db.execute("DELETE FROM temp.keep")
                self._db.executemany("INSERT OR IGNORE INTO temp.keep VALUES (?)", keep)
                self._db.execute(
                    "DELETE FROM embedding WHERE text_hash NOT IN (SELECT text_hash FROM temp.keep)"
                )
                dropped = int(self._db.changes())
                self._db.execute("DELETE FROM temp.keep")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return dropped

    def count(self, model_id: str | None = None) -> int:
        with self._lock:
            if model_id is None:
                return int(self._db.execute("SELECT count(*) FROM embedding").fetchall()[0][0])
            sql = "SELECT count(*) FROM embedding WHERE model_id = ?"
            return int(self._db.execute(sql, (model_id,)).fetchall()[0][0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def embed_documents_cached(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts: Sequence[str],
    *,
    store: Callable[[str, int, list[tuple[str, Vector]]], object] | None = None,
) -> Matrix:
    """``embedder.embed_documents(texts)``, calling the provider only for texts not in ``cache``.
    Fresh vectors go to ``store(model_id, dim, pairs)`` (default: ``cache.put_many``)."""
    model_id, dim = embedder.model_id, embedder.dim
    hits = cache.get_many(model_id, texts)
    missing = list(dict.fromkeys(t for t in texts if t not in hits))
    if missing:
        fresh = embedder.embed_documents(missing)
        (store or cache.put_many)(model_id, dim, list(zip(missing, fresh, strict=True)))
        hits.update(zip(missing, fresh, strict=True))
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i] = hits[text]
    return out
