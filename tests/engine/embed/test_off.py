"""Keyword-only mode."""

from __future__ import annotations

import numpy as np
import pytest

from engine.embed.off import OffEmbedder


@pytest.mark.req("embed:off")
@pytest.mark.req("embed:states")
def test_off_is_ready_with_zero_width_vectors() -> None:
    off = OffEmbedder()
    status = off.probe()
    assert (status.provider, status.state, status.model_id, status.dim) == ("off", "ready", "off", 0)
    assert any("keyword" in n.lower() for n in status.notes)
    assert off.embed_documents(["a", "b"]).shape == (2, 0)
    assert off.embed_query("a").shape == (0,) and off.embed_query("a").dtype == np.float32
