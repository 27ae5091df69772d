"""The Markdown store: the workspace directory that *is* the memory (see docs/store-format.md)."""
