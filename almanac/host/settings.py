"""The host's memory settings, as the memory document names them (pure).

Off by default: a host that never turns memory on behaves as if this library did not exist.
``autoLoad`` and ``autoSave`` default on *underneath* the switch, so enabling memory does something;
``includeArchived`` defaults off, because an archive that still loads is not an archive. The two
config layers these are read from, and where each value came from, are :mod:`almanac.host.layers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

#: The providers a host may choose by the ``provider`` setting (``almanac.host.providers``).
PROVIDERS = ("almanac", "mcp")
#: Any single provider operation that takes longer than this counts as unavailable.
OP_LIMIT_S = 20.0


class HostSettingsError(ValueError):
    """A settings value of the wrong type, out of range or not one of its choices; names the field."""


_RANGES: dict[str, tuple[float, float]] = {
    "top_k": (1, 50),
    "decay_half_life_days": (1, 3_650),
    "max_item_chars": (100, 8_000),
    "max_block_chars": (500, 32_000),
    "max_tokens": (100, 4_000),
    "load_timeout": (0.05, OP_LIMIT_S),
    "save_timeout": (0.1, 600.0),
}
_CHOICES: dict[str, tuple[str, ...]] = {"provider": PROVIDERS}

#: The document's camelCase spellings, accepted beside the Python names.
ALIASES = {
    "autoLoad": "auto_load",
    "autoSave": "auto_save",
    "topK": "top_k",
    "decayHalfLifeDays": "decay_half_life_days",
    "includeArchived": "include_archived",
    "maxItemChars": "max_item_chars",
    "maxBlockChars": "max_block_chars",
    "maxTokens": "max_tokens",
    "loadTimeout": "load_timeout",
    "saveTimeout": "save_timeout",
}


@dataclass(frozen=True)
class HostSettings:
    enabled: bool = False
    """Master switch. While off nothing else has any effect and no provider is ever called."""
    provider: str = "almanac"
    """Which provider answers: ``almanac`` or ``mcp`` (another MCP memory server)."""
    top_k: int = 5
    """How many memories a search may return (1–50)."""
    auto_load: bool = True
    """Search memory with the user's message before every turn and return the ``<memory>`` block."""
    auto_save: bool = True
    """Extract at most three durable facts after every turn and save them, unscoped."""
    decay_half_life_days: float = 60.0
    """Recency weighting, for providers that support decay (1–3,650 days)."""
    include_archived: bool = False
    """Whether searches reach into cold storage."""
    max_item_chars: int = 1_000
    """One memory is cut at this many characters in the block."""
    max_block_chars: int = 8_000
    """The whole block never exceeds this many characters."""
    max_tokens: int = 2_000
    """The token budget asked of ``get_context``."""
    load_timeout: float = 3.0
    """Seconds a load may take before it gives up and returns an empty block (at most 20)."""
    save_timeout: float = 30.0
    """Seconds one ``after_turn`` (extraction and saves, tries again included) may take in the
    background; a save not in memory by then is counted as failed (``MemoryProvider.status``)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            check(f.name, str(f.type), getattr(self, f.name))

    @property
    def loads(self) -> bool:
        return self.enabled and self.auto_load

    @property
    def saves(self) -> bool:
        return self.enabled and self.auto_save

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> HostSettings:
        """Settings from one parsed mapping. Unknown keys are ignored (a newer host's file still
        works); a bad value raises :class:`HostSettingsError` and none of the mapping is used."""
        return cls(**known(raw))


NAMES = tuple(f.name for f in fields(HostSettings))


def field_name(key: str) -> str | None:
    """The Python name of a settings key in either spelling, or None for an unknown key."""
    name = ALIASES.get(key, key)
    return name if name in NAMES else None


def known(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The known keys of ``raw`` by their Python names (unknown keys dropped)."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = field_name(key) if isinstance(key, str) else None
        if name is not None:
            out[name] = value
    return out


def check(name: str, kind: str, value: object) -> None:
    """Raise :class:`HostSettingsError` unless ``value`` is right for the field ``name`` of type
    ``kind`` (``bool``, ``int``, ``float`` or ``str``)."""
    if kind == "bool":
        if not isinstance(value, bool):
            raise HostSettingsError(f"{name} must be true or false, not {value!r}")
        return
    if kind == "str":
        choices = _CHOICES[name]
        if value not in choices:
            raise HostSettingsError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HostSettingsError(f"{name} must be a number, not {value!r}")
    if kind == "int" and not isinstance(value, int):
        raise HostSettingsError(f"{name} must be a whole number, not {value!r}")
    low, high = _RANGES[name]
    if not low <= value <= high:
        raise HostSettingsError(f"{name} must be between {low:g} and {high:g}, not {value!r}")
