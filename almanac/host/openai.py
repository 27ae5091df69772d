"""A ready adapter for OpenAI-compatible chat endpoints (``POST {base_url}/chat/completions``).

Any host model call with the shape ``async (messages) -> str`` works as well; this one covers the
many servers that speak that wire format (OpenAI, vLLM, llama.cpp, Ollama's compatible endpoint).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

ChatFn = Callable[[list[dict[str, str]]], Awaitable[str]]


class ModelError(RuntimeError):
    """The chat endpoint failed or answered in an unexpected shape."""


def openai_chat(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = 30.0,
    temperature: float = 0.0,
    http_client: httpx.AsyncClient | None = None,
) -> ChatFn:
    """A chat function for ``model`` at ``base_url`` (for example ``https://api.openai.com/v1``)."""
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def chat(messages: list[dict[str, str]]) -> str:
        body: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature}
        try:
            if http_client is not None:
                response = await http_client.post(url, json=body, headers=headers, timeout=timeout)
            else:
                async with httpx.AsyncClient(timeout=timeout) as client:
                    response = await client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ModelError(f"chat endpoint unreachable: {exc.__class__.__name__}") from exc
        if response.status_code != 200:
            raise ModelError(f"chat endpoint answered {response.status_code}: {response.text[:200]}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError("chat endpoint answered without choices[0].message.content") from None
        if not isinstance(content, str):
            raise ModelError("chat endpoint answered a non-text message")
        return content

    return chat
