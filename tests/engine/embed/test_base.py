"""ProviderStatus, normalisation, the time limit and the probe's state mapping."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from engine.embed.base import (
    Embedder,
    Matrix,
    ProviderName,
    ProviderStatus,
    Vector,
    call_with_limit,
    l2_normalize,
    probe_embedder,
)
from engine.embed.errors import ProviderNotSetUp, ProviderTimeout


def test_l2_normalize_keeps_zero_rows() -> None:
    out = l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    assert np.allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(ValueError):
        l2_normalize(np.zeros(3))


@pytest.mark.req("embed:states")
def test_status_round_trips_through_json() -> None:
    status = ProviderStatus("vertex", "not_set_up", "m", 768, "set a project", ("sends text to Google",))
    assert ProviderStatus.from_json(status.to_json()) == status
    assert not status.ready
    with pytest.raises(ValueError):
        ProviderStatus.from_json({**status.to_json(), "state": "sleepy"})


def test_call_with_limit_returns_raises_and_times_out() -> None:
    assert call_with_limit(lambda: 7, 5, "quick") == 7
    with pytest.raises(ZeroDivisionError):
        call_with_limit(lambda: 1 // 0, 5, "broken")
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(ProviderTimeout, match=r"longer than 0\.05 s"):
        call_with_limit(lambda: release.wait(10), 0.05, "stuck")
    assert time.monotonic() - started < 5
    release.set()


class Scripted:
    """An embedder whose single call does what the test says."""

    def __init__(self, behave: str) -> None:
        self.behave = behave

    @property
    def provider(self) -> ProviderName:
        return "local"

    @property
    def model_id(self) -> str:
        return "scripted"

    @property
    def dim(self) -> int:
        return 2

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> Vector:
        if self.behave == "not_set_up":
            raise ProviderNotSetUp("no project")
        if self.behave == "bug":
            raise KeyError("oops")
        if self.behave == "unnormalised":
            return np.array([3.0, 4.0], dtype=np.float32)
        return np.array([0.6, 0.8], dtype=np.float32)

    def probe(self) -> ProviderStatus:
        return probe_embedder(self, model_id="scripted", dim=2, notes=["a note"])


@pytest.mark.req("embed:states")
@pytest.mark.parametrize(
    ("behave", "state", "detail"),
    [
        ("ok", "ready", ""),
        ("not_set_up", "not_set_up", "no project"),
        ("bug", "not_available", "KeyError"),
        ("unnormalised", "not_available", "not L2-normalised"),
    ],
)
def test_probe_maps_the_call_to_a_state(behave: str, state: str, detail: str) -> None:
    embedder: Embedder = Scripted(behave)
    status = embedder.probe()
    assert status.state == state and detail in status.detail
    assert status.notes == ("a note",) and status.model_id == "scripted"
