"""A real uvicorn server in this process, on a free port (for tests that need real HTTP streaming)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import anyio
import uvicorn
from starlette.types import ASGIApp

from gateway.serve import bind


@asynccontextmanager
async def serving(app: ASGIApp, *, lifespan: Literal["on", "off"] = "off") -> AsyncIterator[str]:
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan=lifespan, access_log=False))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
    sock.close()
