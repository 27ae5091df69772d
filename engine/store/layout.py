"""Where things live in a workspace directory (docs/store-format.md): folder and file names, and
the paths built from them. Pure; imports nothing else of :mod:`engine.store`, so any module may use
it.

::

    facts/YYYY-MM.md              the append-only ledger, one segment per month
    notes/YYYY/MM/DD/<id>.md      live notes        notes/Imported/<label>/…  imported notes
    archive/<same path as notes>  archived notes (cold storage)
    retired/notes/<same path>     retired notes     retired/logs/YYYY/MM/DD.md  retired log entries
    logs/YYYY/MM/DD.md            day logs
    .almanac.lock                 held by the engine serving the directory
    .index/ .cache/               derived data, safe to delete
    .transfer-*/                  an import's staging folder (removed at open if a crash left one)
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Final

FACTS: Final = "facts"
NOTES: Final = "notes"
ARCHIVE: Final = "archive"
RETIRED: Final = "retired"
LOGS: Final = "logs"
#: The folders that hold the store itself (the memory; everything else beside them is derived).
STORE_DIRS: Final = (FACTS, NOTES, ARCHIVE, RETIRED, LOGS)

#: Derived data beside the store (the embedding cache, the YAML memo): safe to delete, never exported.
CACHE: Final = ".cache"
#: The search index (engine.index): derived, safe to delete, never exported.
INDEX: Final = ".index"
#: The folders of derived data.
DERIVED: Final = (INDEX, CACHE)
#: The YAML memo's file in :data:`CACHE` (engine.store.yamlmemo).
MEMO_NAME: Final = "store-yaml.json"
#: Held by the engine serving the directory (engine.store.fsio.DirectoryLock).
LOCK_NAME: Final = ".almanac.lock"
#: An import's staging folders (``.transfer-import``, ``.transfer-restore``): what it writes goes
#: there first and is moved into place whole at the end, so one a crash left behind holds nothing
#: that was ever part of the store; it is removed when the workspace opens.
STAGING_PREFIX: Final = ".transfer-"

#: Where each kind of note lives, below the workspace root.
LIVE_NOTES: Final = Path(NOTES)
ARCHIVED_NOTES: Final = Path(ARCHIVE)
RETIRED_NOTES: Final = Path(RETIRED, NOTES)
#: Where day logs live, below the workspace root.
LIVE_LOGS: Final = Path(LOGS)
RETIRED_LOGS: Final = Path(RETIRED, LOGS)
#: Where imported Markdown goes: ``notes/Imported/<label>/<relative path>``.
IMPORTED: Final = PurePosixPath(NOTES, "Imported")


def segment_path(when: datetime) -> Path:
    """The ledger segment (below the workspace root) an event at ``when`` is appended to."""
    return Path(FACTS, f"{when.year:04d}-{when.month:02d}.md")


def day_path(day: date) -> Path:
    """A day log's path below its state's log folder: ``YYYY/MM/DD.md``."""
    return Path(f"{day.year:04d}", f"{day.month:02d}", f"{day.day:02d}.md")


def note_path(day: date, note_id: str) -> Path:
    """A new note's path below its state's note folder: ``YYYY/MM/DD/<id>.md``."""
    return Path(f"{day.year:04d}", f"{day.month:02d}", f"{day.day:02d}", f"{note_id}.md")
