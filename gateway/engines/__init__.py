"""Where a workspace runs: supervisor, warm spare, child processes, the embedder service."""
