"""The host's memory settings, as the seed names them (``enabled``, ``autoLoad``, ``autoSave``).

Off by default: a host that never turns memory on behaves as if this library did not exist.
``autoLoad`` and ``autoSave`` default on *underneath* the switch, so enabling memory does something.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


class HostSettingsError(ValueError):
    """A settings value of the wrong type or out of range; the message names the field."""


_RANGES: dict[str, tuple[float, float]] = {
    "max_item_chars": (100, 8_000),
    "max_block_chars": (500, 32_000),
    "max_tokens": (100, 4_000),
    "load_timeout": (0.05, 60.0),
    "save_timeout": (0.1, 600.0),
}

# The seed's camelCase spellings, accepted beside the Python names.
_ALIASES = {
    "autoLoad": "auto_load",
    "autoSave": "auto_save",
    "maxItemChars": "max_item_chars",
    "maxBlockChars": "max_block_chars",
    "maxTokens": "max_tokens",
    "loadTimeout": "load_timeout",
    "saveTimeout": "save_timeout",
}


@dataclass(frozen=True)
class HostSettings:
    enabled: bool = False
    """Master switch. While off nothing else has any effect and Almanac is never called."""
    auto_load: bool = True
    """Search memory with the user's message before every turn and return the ``<memory>`` block."""
    auto_save: bool = True
    """Extract at most three durable facts after every turn and save them, unscoped."""
    max_item_chars: int = 1_000
    """One memory is cut at this many characters in the block."""
    max_block_chars: int = 8_000
    """The whole block never exceeds this many characters."""
    max_tokens: int = 2_000
    """The token budget asked of ``get_context``."""
    load_timeout: float = 3.0
    """Seconds ``before_turn`` may take before it gives up and returns an empty block."""
    save_timeout: float = 30.0
    """Seconds one ``after_turn`` (extraction and saves, tries again included) may take in the
    background; a save not in Almanac by then is counted as failed (``MemoryProvider.status``)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool":
                if not isinstance(value, bool):
                    raise HostSettingsError(f"{f.name} must be true or false, not {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise HostSettingsError(f"{f.name} must be a number, not {value!r}")
            if f.type == "int" and not isinstance(value, int):
                raise HostSettingsError(f"{f.name} must be a whole number, not {value!r}")
            low, high = _RANGES[f.name]
            if not low <= value <= high:
                raise HostSettingsError(f"{f.name} must be between {low:g} and {high:g}, not {value!r}")

    @property
    def loads(self) -> bool:
        return self.enabled and self.auto_load

    @property
    def saves(self) -> bool:
        return self.enabled and self.auto_save

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> HostSettings:
        """Settings from a parsed config file. Unknown keys are ignored (a newer host's file still
        works); a bad value raises :class:`HostSettingsError` and none of the file is used."""
        known = {f.name for f in fields(cls)}
        values = {_ALIASES.get(k, k): v for k, v in raw.items()}
        return cls(**{k: v for k, v in values.items() if k in known})
