"""Memory providers: Almanac (service or local folder) and any MCP memory server."""

from almanac.host.providers.almanac import AlmanacProvider
from almanac.host.providers.base import (
    OP_LIMIT_S,
    Found,
    Item,
    Notes,
    Provider,
    ProviderState,
    Search,
    State,
)
from almanac.host.providers.mcp import HEADROOM, McpMemoryProvider, McpTools

__all__ = [
    "HEADROOM",
    "OP_LIMIT_S",
    "AlmanacProvider",
    "Found",
    "Item",
    "McpMemoryProvider",
    "McpTools",
    "Notes",
    "Provider",
    "ProviderState",
    "Search",
    "State",
]
