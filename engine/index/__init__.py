"""The rebuildable SQLite index of a workspace (``<workspace>/.index/``): FTS5 + sqlite-vec.

::

    docs      store catalog → chunk and fact rows, with context columns (pure)
    schema    tables, FTS5 external-content tables and triggers; SCHEMA_VERSION
    reads     searches and reads
    db        IndexDB: open / check / rebuild-on-mismatch, writes
    indexer   Indexer: listener, reconcile, hand-edit scan, background embedding
"""
