"""Keyword-only mode (``embedding_provider = off``).

Rather than ``None``, "off" is an embedder like the others (a null object): ``provider == "off"``,
``model_id == "off"``, ``dim == 0``. It returns ``(n, 0)`` / ``(0,)`` arrays and its probe says
``ready``: keyword-only mode always works. Callers test ``embedder.dim == 0`` (or
``provider == "off"``) to skip the vector side of the index and recall.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from engine.embed.base import Matrix, ProviderName, ProviderStatus, Vector

OFF_MODEL_ID: Final = "off"
OFF_NOTES: Final = (
    "Keyword-only mode: no text leaves the machine and nothing is embedded.",
    "Recall uses keyword search (FTS5) only; paraphrases that share no words are not found.",
)


class OffEmbedder:
    """Keyword-only mode: zero-width vectors, always ready."""

    @property
    def provider(self) -> ProviderName:
        return "off"

    @property
    def model_id(self) -> str:
        return OFF_MODEL_ID

    @property
    def dim(self) -> int:
        return 0

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return np.zeros((len(texts), 0), dtype=np.float32)

    def embed_query(self, text: str) -> Vector:
        return np.zeros((0,), dtype=np.float32)

    def probe(self) -> ProviderStatus:
        return ProviderStatus("off", "ready", OFF_MODEL_ID, 0, "", OFF_NOTES)
