"""Where the benchmarks find the LoCoMo dev split (never copied into the project).

``$ALMANAC_LOCOMO`` names the file if it is set; otherwise the first
``shared/bench/locomo/locomo10_dev.json`` found beside this checkout or any folder above it — so
``/work/main``, a worktree such as ``/work/wt/NAME`` and a clone elsewhere under ``/work`` all find
``/work/shared``. A bench given an explicit path uses that.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "ALMANAC_LOCOMO"
RELATIVE = Path("shared") / "bench" / "locomo" / "locomo10_dev.json"
CHECKOUT = Path(__file__).resolve().parents[1]


def locomo_path(env: dict[str, str] | None = None, start: Path = CHECKOUT) -> Path:
    """The LoCoMo dev split: ``$ALMANAC_LOCOMO``, else ``shared/bench/locomo/…`` in the nearest
    folder at or above ``start`` that has it, else where it would be beside ``start`` (absent)."""
    named = (os.environ if env is None else env).get(ENV)
    if named:
        return Path(named).expanduser()
    for folder in (start, *start.parents):
        candidate = folder / RELATIVE
        if candidate.exists():
            return candidate
    return start.parent / RELATIVE
