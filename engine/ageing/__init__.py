"""Memory that ages honestly (SPEC §6): decay, archive, citations, the retrieval log.

::

    decay          pure: half-lives, decay scores, the ranking nudge with its floor
    archive        the cold-storage banner (pure) and the sweep that moves decayed notes
    citations      the append-only citations journal, folded into note files in the background
    retrieval_log  retrieval-log.jsonl: one line per search, never memory content
    lifecycle      the one object the composition root wires to Memory, Recall and the tools

Time always comes from an injected clock; nothing here sleeps to let time pass.
"""
