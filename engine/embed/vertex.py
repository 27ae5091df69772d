"""Optional provider: Google Vertex AI ``gemini-embedding-001`` through ``google-genai``.

Install with ``pip install 'almanac[vertex]'``. Credentials come from Application Default
Credentials (``google.auth.default``) unless passed in; the project from the config, else from ADC.
Vectors are 768-d (Matryoshka-truncated, so we L2-normalise them). Texts go ``batch_size`` per
request; a 400 saying a request holds too many instances makes us retry that batch one text at a
time (and keep doing so); a 429 is retried with exponential backoff, a bounded number of times.
Every HTTP call has a timeout (``timeout_s``, by default the 20 s limit of SPEC §8).

``google-genai`` is imported when the first client is built, never at module import.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from engine.embed.errors import (
    EmbedRequestError,
    ProviderNotAvailable,
    ProviderNotSetUp,
    ProviderTimeout,
)

MODEL: Final = "gemini-embedding-001"
DIM: Final = 768
SCOPES: Final = ("https://www.googleapis.com/auth/cloud-platform",)
INSTALL_HINT: Final = "pip install 'almanac[vertex]'"
ADC_HINT: Final = (
    "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file"
)

NOTES: Final = (
    "Google Vertex AI gemini-embedding-001, 768 dimensions: texts are sent to Google Cloud.",
    "Multilingual and stronger than the local model; needs network, a project with the "
    "Vertex AI API enabled, and Application Default Credentials. Calls are billed and rate-limited.",
    "Reads up to 2,048 tokens of each text (longer text is cut).",
)


@dataclass(frozen=True)
class VertexConfig:
    project: str | None = None
    location: str = "us-central1"
    model: str = MODEL
    dim: int = DIM
    batch_size: int = 32
    timeout_s: float = DEFAULT_LIMIT_S
    max_retries: int = 5
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 32.0
    #: Another endpoint (a regional or private one, or a fake in tests); ``None``: Google's default.
    base_url: str | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.dim < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise ValueError("batch_size and dim must be >= 1, max_retries >= 0, timeout_s > 0")


@dataclass
class _Client:
    genai: Any
    types: Any
    errors: Any
    client: Any
    http: Any


@dataclass
class VertexEmbedder:
    """gemini-embedding-001 as an :class:`~engine.embed.base.Embedder`.

    ``credentials`` (a ``google.auth.credentials.Credentials``) replaces ADC. The client is built
    on the first call; :meth:`close` releases its connections.
    """

    config: VertexConfig = field(default_factory=VertexConfig)
    credentials: Any = None
    _client: _Client | None = field(default=None, init=False, repr=False)
    _one_at_a_time: bool = field(default=False, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def provider(self) -> ProviderName:
        return "vertex"

    @property
    def model_id(self) -> str:
        return f"vertex:{self.config.model}@{self.config.dim}"

    @property
    def dim(self) -> int:
        return self.config.dim

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts, "RETRIEVAL_DOCUMENT")

    def embed_query(self, text: str) -> Vector:
        row: Vector = self._embed([text], "RETRIEVAL_QUERY")[0]
        return row

    def probe(self) -> ProviderStatus:
        # One probe is one operation: finding ADC, the call and any 429 retries share the limit.
        return probe_embedder(
            self, model_id=self.model_id, dim=self.dim, notes=NOTES, limit_s=self.config.timeout_s
        )

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.http.close()
                self._client = None

    # -- internals ---------------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str], task_type: str) -> Matrix:
        client = self._connect()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        step = 1 if self._one_at_a_time else self.config.batch_size
        for start in range(0, len(texts), step):
            batch = list(texts[start : start + step])
            out[start : start + len(batch)] = self._embed_batch(client, batch, task_type)
        return out

    def _embed_batch(self, client: _Client, batch: list[str], task_type: str) -> Matrix:
        try:
            return self._call(client, batch, task_type)
        except _TooManyInstances:
            self._one_at_a_time = True
            return np.concatenate([self._call(client, [text], task_type) for text in batch])

    def _call(self, client: _Client, batch: list[str], task_type: str) -> Matrix:
        import httpx

        config = client.types.EmbedContentConfig(
            task_type=task_type, output_dimensionality=self.dim, auto_truncate=True
        )
        delay = self.config.backoff_initial_s
        for attempt in range(self.config.max_retries + 1):
            try:
                response = client.client.models.embed_content(
                    model=self.config.model, contents=batch, config=config
                )
            except client.errors.APIError as exc:
                if exc.code == 429 and attempt < self.config.max_retries:
                    time.sleep(delay)
                    delay = min(delay * 2, self.config.backoff_max_s)
                    continue
                raise _translate_api_error(exc, len(batch)) from exc
            except httpx.TimeoutException as exc:
                raise ProviderTimeout(
                    f"Vertex AI did not answer within {self.config.timeout_s:g} s; check the network "
                    "and the endpoint, then probe again"
                ) from exc
            except httpx.TransportError as exc:
                raise ProviderNotAvailable(
                    f"cannot reach Vertex AI ({type(exc).__name__}: {exc}); check the network"
                ) from exc
            except Exception as exc:
                translated = _translate_auth_error(exc)
                if translated is None:
                    raise
                raise translated from exc
            return self._vectors(response, len(batch))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _vectors(self, response: Any, expected: int) -> Matrix:
        rows = [e.values for e in (response.embeddings or [])]
        if len(rows) != expected or any(r is None or len(r) != self.dim for r in rows):
            raise EmbedRequestError(
                f"Vertex AI answered {len(rows)} vectors for {expected} texts, or vectors that are "
                f"not {self.dim}-d; check the model name and output dimensionality"
            )
        return l2_normalize(np.asarray(rows, dtype=np.float32))

    def _connect(self) -> _Client:
        with self._lock:
            if self._client is None:
                self._client = self._build_client()
            return self._client

    def _build_client(self) -> _Client:
        try:
            import httpx
            from google import genai
            from google.genai import errors, types
        except ImportError as exc:
            raise ProviderNotAvailable(
                f"the Vertex AI provider needs google-genai, which is not installed ({exc}); "
                f"run {INSTALL_HINT}"
            ) from exc
        credentials, project = self.credentials, self.config.project
        if credentials is None:
            credentials, adc_project = _default_credentials()
            project = project or adc_project
        if not project:
            raise ProviderNotSetUp(
                "no Google Cloud project is set for Vertex AI; set the project in the settings "
                "(or GOOGLE_CLOUD_PROJECT, or `gcloud config set project ID`)"
            )
        http = httpx.Client(timeout=self.config.timeout_s)
        options = types.HttpOptions(
            base_url=self.config.base_url, timeout=int(self.config.timeout_s * 1000), httpx_client=http
        )
        client = genai.Client(
            vertexai=True,
            project=project,
            location=self.config.location,
            credentials=credentials,
            http_options=options,
        )
        return _Client(genai=genai, types=types, errors=errors, client=client, http=http)


class _TooManyInstances(Exception):
    pass


def _default_credentials() -> tuple[Any, str | None]:
    import google.auth
    from google.auth import exceptions

    try:
        credentials, project = google.auth.default(scopes=list(SCOPES))
    except exceptions.DefaultCredentialsError as exc:
        raise ProviderNotSetUp(
            f"Vertex AI is installed but no Application Default Credentials were found; {ADC_HINT}"
        ) from exc
    return credentials, project


def _translate_api_error(exc: Any, batch_len: int) -> Exception:
    code, message = int(exc.code), str(exc.message or exc)
    if code == 400 and batch_len > 1 and "instances" in message.lower():
        return _TooManyInstances(message)
    if code in (401, 403):
        return ProviderNotSetUp(
            f"Vertex AI refused the credentials ({code}: {message}); check that the account may use "
            "the Vertex AI API in this project (roles/aiplatform.user) and that the API is enabled"
        )
    if code == 404:
        return ProviderNotSetUp(
            f"Vertex AI has no {MODEL} here ({message}); check the project and the location"
        )
    if code == 429:
        return ProviderNotAvailable(f"Vertex AI quota is exhausted (429: {message}); try again later")
    if code >= 500:
        return ProviderNotAvailable(f"Vertex AI failed ({code}: {message}); try again later")
    return EmbedRequestError(f"Vertex AI refused the request ({code}: {message})")


def _translate_auth_error(exc: Exception) -> Exception | None:
    from google.auth import exceptions

    if isinstance(exc, exceptions.RefreshError):
        return ProviderNotSetUp(f"the Google credentials cannot be refreshed ({exc}); {ADC_HINT}")
    if isinstance(exc, exceptions.TransportError):
        return ProviderNotAvailable(f"cannot reach Google's token endpoint ({exc}); check the network")
    return None
