"""Memory around every turn of an agent host (``host:turn-loop``).

A host calls :meth:`MemoryProvider.before_turn` with the user's message and splices the returned
``<memory>`` block into that turn's context; after the reply it calls
:meth:`MemoryProvider.after_turn`, which extracts at most three durable facts with the host's own
small model and saves them without making the turn wait. With the master switch off nothing is
called and the block is empty, so the assembled prompt is byte-identical. See ``docs/host.md``.
"""

from almanac.host.block import PREAMBLE, memory_block
from almanac.host.connection import AlmanacBusy, AlmanacRefused, AlmanacUnavailable, Endpoint
from almanac.host.extract import EXTRACTION_PROMPT, ExtractionError, extraction_messages, parse_facts
from almanac.host.openai import ChatFn, ModelError, openai_chat
from almanac.host.provider import MemoryProvider, SaveStatus
from almanac.host.settings import HostSettings, HostSettingsError

__all__ = [
    "EXTRACTION_PROMPT",
    "PREAMBLE",
    "AlmanacBusy",
    "AlmanacRefused",
    "AlmanacUnavailable",
    "ChatFn",
    "Endpoint",
    "ExtractionError",
    "HostSettings",
    "HostSettingsError",
    "MemoryProvider",
    "ModelError",
    "SaveStatus",
    "extraction_messages",
    "memory_block",
    "openai_chat",
    "parse_facts",
]
