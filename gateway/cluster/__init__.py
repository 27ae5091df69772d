"""Running past one host: which node serves a workspace (issue 15)."""
