"""Test doubles for the proxy's engine side: a supervisor stand-in over ``httpx.MockTransport``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from gateway.engines.supervisor import Lease, Slot

Handler = (
    Callable[[httpx.Request], httpx.Response] | Callable[[httpx.Request], Coroutine[Any, Any, httpx.Response]]
)


@dataclass
class MockEngines:
    """Stands in for the supervisor: one "engine" answering through a mock transport."""

    handler: Handler
    running: bool = True
    fail: Exception | None = None
    leases: list[bool] = field(default_factory=list)
    slot: Slot = field(default_factory=lambda: Slot("ws"))

    def is_running(self, workspace_id: str) -> bool:
        return self.running

    @asynccontextmanager
    async def lease(self, workspace_id: str, *, counts_as_use: bool = True) -> AsyncIterator[Lease]:
        self.leases.append(counts_as_use)
        if self.fail is not None:
            raise self.fail
        transport = httpx.MockTransport(self.handler)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield Lease(client, self.slot, transport)


class Chunks(httpx.AsyncByteStream):
    """A response body that arrives in pieces, as from a real socket (not pre-read)."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True
