"""The store's YAML blocks as last parsed, kept between starts (``.cache/store-yaml.json``).

Opening a workspace parses every note's frontmatter and every ledger event's YAML block; on a
large store most of that time is YAML (5,400 notes and 994 events: ≈ 0.3 s of a 1.5 s open, more
under load). The memo maps a block's exact text to what :func:`engine.store._yaml.load` made of
it, so a start parses only the blocks it has not seen. It is keyed by the text itself, not by a
file's name or time, so it can never answer for a block that changed: an edited block is a new
key. It is derived data like ``.index/``: safe to delete, rebuilt on the next start, never
exported.

Only values that survive the round trip exactly are kept (the types the safe loader makes:
text, numbers, booleans, null, timestamps, dates, lists and mappings); anything else — a NaN, a
binary scalar, a set — is parsed afresh every time. A memo written by another YAML library
version, or unreadable, is ignored. Each start writes back only the blocks it used.

The memo holds only what :func:`engine.store._yaml.load` accepted, so what it walks (encoding,
decoding, comparing) is bounded by that loader's limits; a block past them (an alias bomb, a
frontmatter too large) is refused before the memo is asked, and never kept. The walks are
recursive: the loader's depth limit keeps them far from Python's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from datetime import date, datetime
from pathlib import Path
from typing import Any, Final

import yaml

from engine.store import _yaml

log = logging.getLogger(__name__)

FORMAT: Final = 2  # 2: only blocks within _yaml's limits
#: What made the parses: a memo from another loader is not used.
LOADER: Final = f"pyyaml {yaml.__version__} libyaml={yaml.__with_libyaml__}"

Encoded = Any  # JSON: str, int, float, bool, None, list, or a one-key tag object


def encode(value: Any) -> Encoded | None:
    """``value`` as JSON, or None when it is not one of the types kept (see the module)."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if kind is datetime:
        return {"t": value.isoformat()}
    if kind is date:
        return {"d": value.isoformat()}
    if kind is list:
        items = [encode(item) for item in value]
        if any(e is None and item is not None for e, item in zip(items, value, strict=True)):
            return None
        return items
    if kind is dict:
        pairs = []
        for key, item in value.items():
            k, v = encode(key), encode(item)
            if (k is None and key is not None) or (v is None and item is not None):
                return None
            pairs.append([k, v])
        return {"m": pairs}
    return None


def decode(data: Encoded) -> Any:
    """What :func:`encode` was given (a fresh copy each time)."""
    if isinstance(data, list):
        return [decode(item) for item in data]
    if isinstance(data, dict):
        if "m" in data:
            return {decode(k): decode(v) for k, v in data["m"]}
        if "t" in data:
            return datetime.fromisoformat(data["t"])
        return date.fromisoformat(data["d"])
    return data


def same(a: Any, b: Any) -> bool:
    """Equal in value *and* type all the way down (``1 == 1.0 == True`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return (
            list(a) == list(b)
            and all(same(k, j) for k, j in zip(a, b, strict=True))
            and all(same(a[k], b[k]) for k in a)
        )
    if isinstance(a, datetime):
        return a == b and a.utcoffset() == b.utcoffset() and (a.tzinfo is None) == (b.tzinfo is None)
    return bool(a == b)


class YamlMemo:
    """A memo of :func:`engine.store._yaml.load` for one workspace open (see the module)."""

    def __init__(self, path: Path | None, known: dict[str, Encoded] | None = None) -> None:
        self.path = path
        self._known: dict[str, Encoded] = known or {}
        self._used: dict[str, Encoded] = {}
        self.parsed = 0  # blocks that were not in the memo

    @classmethod
    def read(cls, path: Path) -> YamlMemo:
        """The memo at ``path``; an empty one when it is missing, unreadable or another loader's."""
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as exc:
            log.info("ignoring the YAML memo %s (%s); it is rebuilt", path, exc)
            return cls(path)
        if not (
            isinstance(data, dict)
            and data.get("format") == FORMAT
            and data.get("loader") == LOADER
            and isinstance(data.get("blocks"), dict)
        ):
            return cls(path)
        return cls(path, data["blocks"])

    def load(self, text: str) -> Any:
        """``_yaml.load(text)``, from the memo when this exact text was parsed before.

        :class:`~engine.store._yaml.Refused` (past the loader's limits) and ``YAMLError`` propagate:
        nothing is kept for them."""
        _yaml.check_size(text)  # before hashing a huge key
        if text in self._known:
            data = self._used[text] = self._known[text]
            return decode(data)
        value = _yaml.load(text)
        self.parsed += 1
        data = encode(value)
        if (data is not None or value is None) and same(decode(data), value):
            self._used[text] = data
        return value

    def save(self) -> None:
        """Write back the blocks this open used, when that differs from what was read.

        Best effort: it is a cache, so a failure is logged and forgotten; the write is atomic
        (a temporary file renamed), so a reader never sees half of one."""
        if self.path is None or self._used.keys() == self._known.keys():
            return
        body = json.dumps(
            {"format": FORMAT, "loader": LOADER, "blocks": self._used},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        partial = self.path.with_name(f".{self.path.name}.partial")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_bytes(body)
            os.replace(partial, self.path)
        except OSError as exc:
            log.info("could not write the YAML memo %s (%s); the next start parses afresh", self.path, exc)
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
