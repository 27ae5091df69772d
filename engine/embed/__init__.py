"""Embeddings for recall (SPEC §8): providers, their states, the host service and the cache.

::

    base      Embedder protocol, ProviderStatus, probe_embedder, l2_normalize
    errors    EmbedError tree (stable codes)
    local     LocalEmbedder: all-MiniLM-L6-v2 int8 ONNX, offline (the default)
    vertex    VertexEmbedder: gemini-embedding-001 via google-genai (extra ``vertex``)
    off       OffEmbedder: keyword-only mode, dim 0
    remote    RemoteEmbedder: client of the host embedder service
    service   the host embedder service (``python -m engine.embed --socket PATH``)
    cache     EmbeddingCache: (model id, text sha256) → vector, survives index rebuilds

Importing this package imports neither onnxruntime, google-genai, starlette nor uvicorn.
"""

from __future__ import annotations

from typing import Any

from engine.embed.base import (
    DEFAULT_LIMIT_S,
    Embedder,
    Matrix,
    ProviderName,
    ProviderStatus,
    Vector,
    probe_embedder,
)
from engine.embed.errors import EmbedError, ProviderState, UnknownProvider
from engine.embed.off import OffEmbedder

__all__ = [
    "DEFAULT_LIMIT_S",
    "EmbedError",
    "Embedder",
    "Matrix",
    "OffEmbedder",
    "ProviderName",
    "ProviderState",
    "ProviderStatus",
    "UnknownProvider",
    "Vector",
    "make_embedder",
    "probe_embedder",
]


def make_embedder(provider: str, **options: Any) -> Embedder:
    """The embedder for a ``provider`` name, built lazily (nothing is loaded or called yet).

    - ``"local"``: :class:`~engine.embed.local.LocalEmbedder` (``model_path``, ``threads``,
      ``batch_size``, ``limit_s``).
    - ``"remote"``: :class:`~engine.embed.remote.RemoteEmbedder` (``socket_path``, ``timeout_s``, …).
    - ``"vertex"``: :class:`~engine.embed.vertex.VertexEmbedder`; ``credentials`` plus any
      :class:`~engine.embed.vertex.VertexConfig` field (``project``, ``location``, ``batch_size``, …).
    - ``"off"``: :class:`~engine.embed.off.OffEmbedder` (no options).
    """
    if provider == "local":
        from engine.embed.local import LocalEmbedder

        return LocalEmbedder(**options)
    if provider == "remote":
        from engine.embed.remote import RemoteEmbedder

        return RemoteEmbedder(**options)
    if provider == "vertex":
        from engine.embed.vertex import VertexConfig, VertexEmbedder

        credentials = options.pop("credentials", None)
        return VertexEmbedder(VertexConfig(**options), credentials=credentials)
    if provider == "off":
        if options:
            raise TypeError(f"the off provider takes no options, got {sorted(options)}")
        return OffEmbedder()
    raise UnknownProvider(f"unknown embedding provider {provider!r}; use one of local, remote, vertex, off")
