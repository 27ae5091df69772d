"""The rebuildable SQLite index of a workspace (``<workspace>/.index/``): FTS5 + sqlite-vec.

::

    docs      store catalog → chunk and fact rows, with context columns (pure)
    schema    each table declared once (SQL, FTS5 + triggers, row types); SCHEMA_VERSION
    reads     IndexReader: searches and row reads, each thread on a read connection of its own
    pool      the reader's connections: a bounded pool, one lent to each reading thread
    kept      what the reader keeps between writes (vectors, sessions, answers), safe across threads
    terms     term statistics for the keyword plan (document frequencies, bm25's row count)
    db        IndexDB: open / check / rebuild-on-mismatch, writes; owns the reader
    indexer   Indexer: listener, reconcile, hand-edit scan, background embedding
"""
