"""The Vertex AI provider against a real local HTTP server speaking Vertex's wire format."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from google.oauth2.credentials import Credentials

from engine.embed.errors import EmbedRequestError, ProviderNotSetUp, ProviderTimeout
from engine.embed.vertex import DIM, VertexConfig, VertexEmbedder
from tests.engine.embed.fake_vertex import FakeVertex, fake_vector, running_fake_vertex

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def fake() -> Iterator[FakeVertex]:
    with running_fake_vertex() as server:
        yield server


def make(fake: FakeVertex, **overrides: object) -> VertexEmbedder:
    options: dict[str, object] = {
        "project": "proj-1",
        "location": "europe-west4",
        "base_url": fake.base_url,
        "timeout_s": 5.0,
        "backoff_initial_s": 0.01,
        **overrides,
    }
    credentials = Credentials(token="fake")  # type: ignore[no-untyped-call]
    return VertexEmbedder(VertexConfig(**options), credentials=credentials)  # type: ignore[arg-type]


@pytest.mark.req("embed:vertex")
def test_sends_vertex_predict_request_and_normalises(fake: FakeVertex) -> None:
    embedder = make(fake)
    try:
        vectors = embedder.embed_documents(["The deploy runs on Fridays.", "Postgres 17 in prod."])
        query = embedder.embed_query("when do we deploy?")
    finally:
        embedder.close()
    assert vectors.shape == (2, DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = np.asarray(fake_vector("Postgres 17 in prod.", DIM), dtype=np.float32)
    assert np.allclose(vectors[1], expected / np.linalg.norm(expected), atol=1e-6)
    assert query.shape == (DIM,) and abs(float(np.linalg.norm(query)) - 1) < 1e-5

    first, second = fake.requests
    assert first["path"] == (
        "/v1beta1/projects/proj-1/locations/europe-west4/publishers/google/models/gemini-embedding-001:predict"
    )
    assert first["headers"]["authorization"] == "Bearer fake"
    assert first["body"] == {
        "instances": [
            {"content": "The deploy runs on Fridays.", "task_type": "RETRIEVAL_DOCUMENT"},
            {"content": "Postgres 17 in prod.", "task_type": "RETRIEVAL_DOCUMENT"},
        ],
        "parameters": {"outputDimensionality": 768, "autoTruncate": True},
    }
    assert second["body"]["instances"] == [{"content": "when do we deploy?", "task_type": "RETRIEVAL_QUERY"}]


@pytest.mark.req("embed:vertex")
def test_splits_into_configured_batches(fake: FakeVertex) -> None:
    embedder = make(fake, batch_size=2)
    texts = [f"memory {i}" for i in range(5)]
    try:
        vectors = embedder.embed_documents(texts)
    finally:
        embedder.close()
    assert [len(r["body"]["instances"]) for r in fake.requests] == [2, 2, 1]
    assert vectors.shape == (5, DIM)
    expected = np.asarray(fake_vector("memory 4", DIM), dtype=np.float32)
    assert np.allclose(vectors[4], expected / np.linalg.norm(expected), atol=1e-6)


@pytest.mark.req("embed:vertex")
def test_too_many_instances_retries_one_at_a_time(fake: FakeVertex) -> None:
    fake.max_instances = 1
    embedder = make(fake, batch_size=3)
    try:
        vectors = embedder.embed_documents(["a", "b", "c"])
        embedder.embed_documents(["d", "e"])
    finally:
        embedder.close()
    # one refused batch of 3, then single texts, and single texts from then on
    assert [len(r["body"]["instances"]) for r in fake.requests] == [3, 1, 1, 1, 1, 1]
    assert vectors.shape == (3, DIM)


@pytest.mark.req("embed:vertex")
def test_backs_off_on_429_then_succeeds(fake: FakeVertex) -> None:
    fake.plan = ["429", "429"]
    embedder = make(fake, backoff_initial_s=0.05)
    started = time.monotonic()
    try:
        vector = embedder.embed_query("retry me")
    finally:
        embedder.close()
    assert len(fake.requests) == 3
    assert time.monotonic() - started >= 0.05 + 0.1  # waited 0.05 s, then 0.1 s
    assert vector.shape == (DIM,)


@pytest.mark.req("embed:vertex")
def test_429_retries_are_bounded(fake: FakeVertex) -> None:
    fake.plan = ["429"] * 10
    embedder = make(fake, max_retries=2)
    try:
        status = embedder.probe()
    finally:
        embedder.close()
    assert len(fake.requests) == 3
    assert status.state == "not_available" and "429" in status.detail


@pytest.mark.req("embed:vertex")
def test_a_refused_request_is_a_request_error(fake: FakeVertex) -> None:
    embedder = make(fake, dim=8)
    fake.plan = ["400-too-many"]  # a 400 on a single text cannot be split further
    try:
        with pytest.raises(EmbedRequestError):
            embedder.embed_query("one text")
    finally:
        embedder.close()


@pytest.mark.req("embed:states")
@pytest.mark.req("embed:vertex")
def test_ready_when_the_endpoint_answers(fake: FakeVertex) -> None:
    embedder = make(fake)
    try:
        status = embedder.probe()
    finally:
        embedder.close()
    assert status.state == "ready", status.detail
    assert (status.provider, status.model_id, status.dim) == (
        "vertex",
        "vertex:gemini-embedding-001@768",
        768,
    )
    assert status.notes and any("Google" in n for n in status.notes)


@pytest.mark.req("embed:states")
def test_hang_past_the_limit_is_not_available(fake: FakeVertex) -> None:
    fake.plan = ["hang"]
    embedder = make(fake, timeout_s=0.5)
    started = time.monotonic()
    try:
        status = embedder.probe()
    finally:
        embedder.close()
    assert status.state == "not_available"
    assert time.monotonic() - started < 5
    fake.plan = ["hang"]
    embedder = make(fake, timeout_s=0.5)
    try:
        with pytest.raises(ProviderTimeout):
            embedder.embed_query("hang")
    finally:
        embedder.close()


@pytest.mark.req("embed:states")
def test_without_a_project_it_is_not_set_up(fake: FakeVertex) -> None:
    embedder = make(fake, project=None)
    status = embedder.probe()
    assert status.state == "not_set_up"
    assert "project" in status.detail
    assert fake.requests == []
    with pytest.raises(ProviderNotSetUp):
        embedder.embed_query("x")


@pytest.mark.req("embed:states")
def test_refused_credentials_are_not_set_up(fake: FakeVertex) -> None:
    fake.plan = ["403"]
    embedder = make(fake)
    try:
        status = embedder.probe()
    finally:
        embedder.close()
    assert status.state == "not_set_up" and "403" in status.detail


def _run_isolated(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with no Google credentials anywhere it could find them."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "NO_GCE_CHECK": "true",  # google.auth: do not look for the GCE metadata server
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )


@pytest.mark.req("embed:states")
def test_without_credentials_it_is_not_set_up(tmp_path: Path) -> None:
    code = (
        "from engine.embed.vertex import VertexConfig, VertexEmbedder\n"
        "s = VertexEmbedder(VertexConfig(project='p', base_url='http://127.0.0.1:9')).probe()\n"
        "print(s.state); print(s.detail)\n"
    )
    result = _run_isolated(code, tmp_path)
    assert result.returncode == 0, result.stderr
    state, detail = result.stdout.splitlines()[:2]
    assert state == "not_set_up"
    assert "Application Default Credentials" in detail


@pytest.mark.req("embed:states")
def test_without_google_genai_it_is_not_available(tmp_path: Path) -> None:
    # None in sys.modules is Python's own way to make an import fail, as if the package were absent.
    code = (
        "import sys; sys.modules['google.genai'] = None\n"
        "from engine.embed.vertex import VertexConfig, VertexEmbedder\n"
        "s = VertexEmbedder(VertexConfig(project='p')).probe()\n"
        "print(s.state); print(s.detail)\n"
    )
    result = _run_isolated(code, tmp_path)
    assert result.returncode == 0, result.stderr
    state, detail = result.stdout.splitlines()[:2]
    assert state == "not_available"
    assert "pip install 'almanac[vertex]'" in detail
