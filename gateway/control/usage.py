"""How much a workspace holds on disk, read from its folder (the store format is public:
docs/store-format.md). Derived data (``.index/``, ``.cache/``) is counted apart from the store."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_DERIVED = (".index", ".cache")
# top-level folder of the store → what its Markdown files are
_KINDS = {
    "notes": "notes",
    "archive": "archived notes",
    "retired": "retired",
    "logs": "day logs",
    "facts": "ledger segments",
}


@dataclass(frozen=True)
class Usage:
    store_bytes: int
    derived_bytes: int
    files: dict[str, int]  # kind → Markdown files

    def rows(self) -> list[tuple[str, str]]:
        out = [(kind, str(count)) for kind, count in self.files.items()]
        out += [("store bytes", str(self.store_bytes)), ("index bytes", str(self.derived_bytes))]
        return out


def measure(root: Path) -> Usage:
    """Walk a workspace folder (no locks needed: it only reads sizes). A missing folder is empty."""
    store = derived = 0
    files = dict.fromkeys(_KINDS.values(), 0)
    for dirpath, _dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        top = rel.parts[0] if rel.parts else ""
        for name in filenames:
            try:
                size = os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
            if top in _DERIVED:
                derived += size
                continue
            store += size
            if top in _KINDS and name.endswith(".md") and not name.startswith("."):
                files[_KINDS[top]] += 1
    return Usage(store, derived, files)
