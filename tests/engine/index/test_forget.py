"""A permanent deletion (``life:delete``) leaves nothing derived behind: no index row, no word in the
index files, and no vector computed from its words in the embedding cache (real local embedder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.embed.cache import text_hash
from engine.scope import Caller
from tests.engine.index.helpers import GatedEmbedder, engine

pytestmark = pytest.mark.req("life:delete")

OWNER = Caller(connection="Dashboard")
WORD = "Zanzibarite"


def cached_hashes(root: Path) -> set[bytes]:
    import apsw

    db = apsw.Connection(str(root / ".cache" / "embeddings.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {bytes(h) for (h,) in db.execute("SELECT text_hash FROM embedding")}
    finally:
        db.close()


def test_the_index_and_the_embedding_cache_forget_a_deleted_note(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    with engine(root) as e:
        e.memory.remember(OWNER, "The greenhouse is watered at dawn.")
        gone = e.memory.remember(OWNER, f"The {WORD} crystal sits in the greenhouse.")
        e.memory.remember(OWNER, "The greenhouse door sticks in winter.")  # a neighbour in its stream
        e.settle()
        with_word = {t for t in e.indexer.db.texts() if WORD in t}  # its chunk and its neighbours'
        assert len(with_word) >= 2 and {text_hash(t) for t in with_word} <= cached_hashes(root)
        e.memory.retire(OWNER, gone.id)
        e.settle()

        e.memory.delete(OWNER, gone.id)
        e.settle()
        assert not [t for t in e.indexer.db.texts() if WORD in t]
        assert not {text_hash(t) for t in with_word} & cached_hashes(root)
        assert cached_hashes(root) <= {text_hash(t) for t in e.indexer.db.texts()}
        index = b"".join(p.read_bytes() for p in (root / ".index").glob("index.sqlite*"))
        cache = b"".join(p.read_bytes() for p in (root / ".cache").glob("embeddings.sqlite*"))
        assert WORD.encode() not in index and WORD.encode() not in cache


def test_a_delete_while_its_words_are_being_embedded_leaves_no_cached_vector(tmp_path: Path) -> None:
    """The background indexer read the note's text and is embedding it when the owner deletes the
    note: the vector it brings back must not land in the cache (it would outlive the deletion)."""
    root = tmp_path / "ws"
    gated = GatedEmbedder()
    with engine(root, gated, settle=False) as e:
        gone = e.memory.remember(OWNER, f"The {WORD} crystal sits in the greenhouse.")
        assert gated.entered.wait(30), "the background indexer never started embedding"
        in_flight = {t for t in gated.waiting if WORD in t}
        assert in_flight  # its words are at the provider right now
        e.memory.retire(OWNER, gone.id)
        e.memory.delete(OWNER, gone.id)  # while the provider still holds them
        gated.gate.set()
        e.settle()
        assert not [t for t in e.indexer.db.texts() if WORD in t]
        assert not {text_hash(t) for t in in_flight} & cached_hashes(root)
        cache = b"".join(p.read_bytes() for p in (root / ".cache").glob("embeddings.sqlite*"))
        assert WORD.encode() not in cache
