"""A fake OpenAI-compatible chat server: a real Starlette app under uvicorn on 127.0.0.1, port 0.

It speaks ``POST /v1/chat/completions`` → ``{"choices": [{"message": {"role", "content"}}]}``.
Requests whose system message is the extraction prompt are answered from :attr:`FakeChat.extractions`
(one scripted answer per request; ``"{"facts": []}"`` once they run out); the others get a reply
that echoes the user's message. ``"500"`` and ``"hang"`` script failures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from almanac.host import EXTRACTION_PROMPT
from tests.threaded import serving_in_thread


@dataclass
class FakeChat:
    port: int = 0
    extractions: list[str] = field(default_factory=list)
    chats: list[dict[str, Any]] = field(default_factory=list)
    extraction_requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def completions(self, request: Request) -> JSONResponse:
        body = await request.json()
        messages = body["messages"]
        if messages[0]["content"] == EXTRACTION_PROMPT:
            self.extraction_requests.append({"body": body, "headers": dict(request.headers)})
            answer = self.extractions.pop(0) if self.extractions else '{"facts": []}'
            if answer == "500":
                return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
            if answer == "hang":
                deadline = time.monotonic() + 30
                while not self.release.is_set() and time.monotonic() < deadline:
                    await anyio.sleep(0.02)
                answer = '{"facts": []}'
        else:
            self.chats.append({"body": body, "headers": dict(request.headers)})
            answer = f"(reply to: {messages[-1]['content']})"
        message = {"role": "assistant", "content": answer}
        return JSONResponse(
            {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}
        )


@contextmanager
def running_fake_chat() -> Iterator[FakeChat]:
    fake = FakeChat()
    app = Starlette(routes=[Route("/v1/chat/completions", fake.completions, methods=["POST"])])
    with serving_in_thread(app) as fake.port:
        try:
            yield fake
        finally:
            fake.release.set()
