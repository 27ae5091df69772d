"""Recall: query parsing, ranking, budget packing and ``get_context`` (see docs/recall.md).

::

    query       query text → quoted FTS5 terms, names (pure)
    lexical     keyword coverage, tag weight, verbatim bonus (pure, life:lexical)
    fusion      weighted fusion, person prior, session score (pure)
    relevance   the absolute match confidence behind ``relevant`` (pure)
    scopes      scoped fact beats unscoped (pure)
    budget      facts share, trimming order, token estimates (pure)
    search      candidates from the index → ranked hits (shell)
    context     get_context (shell)
    status      memory_status (shell)
"""
