"""The learned fusion weights, read from ``fusion_weights.json`` beside this module.

The file is written by ``python -m bench.fit_fusion fit … --write`` and names the data split and
the command that produced it; nothing edits it by hand. Read once per process (cached). The engine
ranks by the hand-set weights: the learned ones gained in engine mode and lost in MCP mode on two
layouts (docs/recall.md, *What was tried*), so only ``bench.locomo --fusion learned`` uses them.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from functools import lru_cache
from pathlib import Path

from engine.recall.fusion import Learned

WEIGHTS_FILE = Path(__file__).with_name("fusion_weights.json")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@lru_cache(maxsize=4)
def load_learned(path: Path = WEIGHTS_FILE) -> Learned:
    """The :class:`Learned` scorer in ``path``; a file that is not one is refused with what to fix."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        weights = payload["weights"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{path.name}: not a fusion weights file ({exc}); rewrite it with bench.fit_fusion"
        ) from exc
    known = {f.name for f in fields(Learned)}
    extra = sorted(set(weights) - known)
    if extra:
        raise ValueError(
            f"{path.name}: unknown signals {', '.join(extra)}; use some of {', '.join(sorted(known))}"
        )
    if not all(_number(v) for v in weights.values()):
        raise ValueError(f"{path.name}: every weight must be a finite number")
    try:
        return Learned(**{k: float(v) for k, v in weights.items()})
    except TypeError as exc:
        raise ValueError(f"{path.name}: {exc}; rewrite it with bench.fit_fusion") from exc
