"""Memory around every turn of an agent host (``host:turn-loop``).

A host calls :meth:`MemoryProvider.before_turn` with the user's message and splices the returned
``<memory>`` block into that turn's context; after the reply it calls
:meth:`MemoryProvider.after_turn`, which extracts at most three durable facts with the host's own
small model and saves them without making the turn wait. With the master switch off nothing is
called and the block is empty, so the assembled prompt is byte-identical. Settings come from two
layers (:func:`load_settings`); the memory itself from a provider (:class:`AlmanacProvider`, or any
MCP memory server through :class:`McpMemoryProvider`). See ``docs/host.md``.
"""

from almanac.host.block import PREAMBLE, memory_block
from almanac.host.connection import AlmanacBusy, AlmanacRefused, AlmanacUnavailable, Endpoint
from almanac.host.extract import EXTRACTION_PROMPT, ExtractionError, extraction_messages, parse_facts
from almanac.host.layers import Layered, LayerError, clear_override, load_settings
from almanac.host.openai import ChatFn, ModelError, openai_chat
from almanac.host.provider import MemoryProvider, SaveStatus
from almanac.host.providers import (
    HEADROOM,
    AlmanacProvider,
    McpMemoryProvider,
    McpTools,
    Notes,
    Provider,
    ProviderState,
    State,
)
from almanac.host.scope import Scope
from almanac.host.settings import HostSettings, HostSettingsError

__all__ = [
    "EXTRACTION_PROMPT",
    "HEADROOM",
    "PREAMBLE",
    "AlmanacBusy",
    "AlmanacProvider",
    "AlmanacRefused",
    "AlmanacUnavailable",
    "ChatFn",
    "Endpoint",
    "ExtractionError",
    "HostSettings",
    "HostSettingsError",
    "LayerError",
    "Layered",
    "McpMemoryProvider",
    "McpTools",
    "MemoryProvider",
    "ModelError",
    "Notes",
    "Provider",
    "ProviderState",
    "SaveStatus",
    "Scope",
    "State",
    "clear_override",
    "extraction_messages",
    "load_settings",
    "memory_block",
    "openai_chat",
    "parse_facts",
]
