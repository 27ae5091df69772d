"""The rebuildable SQLite index of a workspace (``<workspace>/.index/``): FTS5 + sqlite-vec.

::

    docs      store catalog → chunk and fact rows, with context columns (pure)
    schema    each table declared once (SQL, FTS5 + triggers, row types); SCHEMA_VERSION
    reads     IndexReader: searches, row reads, and the in-memory copies (vectors, sessions, term stats)
    db        IndexDB: open / check / rebuild-on-mismatch, writes; owns the reader
    indexer   Indexer: listener, reconcile, hand-edit scan, background embedding
"""
