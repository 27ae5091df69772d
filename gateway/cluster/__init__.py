"""Running past one host: which node serves a workspace (``run:scale-out``)."""
