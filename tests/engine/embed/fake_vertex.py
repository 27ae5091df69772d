"""A fake Vertex AI endpoint: a real Starlette app under uvicorn on 127.0.0.1, port 0, in a thread.

It speaks the wire format google-genai 2.x uses for ``gemini-embedding-001`` on Vertex (read from
``google/genai/models.py``: ``_EmbedContentParametersPrivate_to_vertex`` builds the request,
``_EmbedContentResponse_from_vertex`` parses ``predictions[].embeddings``):

``POST /v1beta1/projects/{p}/locations/{l}/publishers/google/models/gemini-embedding-001:predict``
``{"instances": [{"content", "task_type"}], "parameters": {"outputDimensionality", "autoTruncate"}}``
→ ``{"predictions": [{"embeddings": {"values": [...], "statistics": {...}}}]}``.

``POST /token`` is an OAuth token endpoint (what google-auth's refresh of an ``authorized_user``
Application Default Credentials file calls, when the file's ``token_uri`` points here).

Tests script its answers with :attr:`FakeVertex.plan` (``"429"``, ``"hang"``, ``"400-too-many"``,
``"403"``), one entry consumed per request; with an empty plan it answers normally.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.threaded import serving_in_thread

PREDICT = "/v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}:predict"


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic, deliberately un-normalised vector for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    values: list[float] = (np.random.default_rng(seed).normal(size=dim) * 3.0).tolist()
    return values


def _api_error(code: int, status: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "status": status}}, status_code=code)


@dataclass
class FakeVertex:
    port: int = 0
    plan: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[dict[str, Any]] = field(default_factory=list)
    max_instances: int = 250
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def token(self, request: Request) -> JSONResponse:
        form = await request.form()
        self.tokens.append(dict(form))
        return JSONResponse({"access_token": "fake-access-token", "expires_in": 3600, "token_type": "Bearer"})

    async def predict(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append(
            {
                "path": request.url.path,
                "headers": dict(request.headers),
                "body": body,
                "params": request.path_params,
            }
        )
        action = self.plan.pop(0) if self.plan else "ok"
        if action == "429":
            return _api_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform.googleapis.com")
        if action == "403":
            return _api_error(403, "PERMISSION_DENIED", "Permission 'aiplatform.endpoints.predict' denied")
        if action == "hang":  # hold the request until the test is over (bounded, in case it never is)
            deadline = time.monotonic() + 30
            while not self.release.is_set() and time.monotonic() < deadline:
                await anyio.sleep(0.02)
            return _api_error(504, "DEADLINE_EXCEEDED", "released")
        instances = body["instances"]
        if action == "400-too-many" or len(instances) > self.max_instances:
            return _api_error(
                400, "INVALID_ARGUMENT", "Unable to submit request because the model supports 1 instances"
            )
        dim = int(body.get("parameters", {}).get("outputDimensionality", 3072))
        predictions = [
            {
                "embeddings": {
                    "values": fake_vector(inst["content"], dim),
                    "statistics": {"token_count": len(inst["content"].split()), "truncated": False},
                }
            }
            for inst in instances
        ]
        return JSONResponse({"predictions": predictions, "metadata": {"billableCharacterCount": 1}})


@contextmanager
def running_fake_vertex() -> Iterator[FakeVertex]:
    fake = FakeVertex()
    app = Starlette(
        routes=[Route(PREDICT, fake.predict, methods=["POST"]), Route("/token", fake.token, methods=["POST"])]
    )
    with serving_in_thread(app) as fake.port:
        try:
            yield fake
        finally:
            fake.release.set()
