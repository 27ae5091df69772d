"""What every embedding provider is: the :class:`Embedder` protocol and its :class:`ProviderStatus`.

A provider's state (SPEC §8) is decided by calling it once on a short text (:func:`probe_embedder`),
never by checking that it imports. Any single provider operation that takes longer than the limit
(:data:`DEFAULT_LIMIT_S`, 20 s) counts as ``not_available``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from engine.embed.errors import EmbedError, ProviderState, ProviderTimeout

ProviderName = Literal["local", "vertex", "off", "remote"]
Matrix = npt.NDArray[np.float32]
"""``(n, dim)`` float32, each row L2-normalised (or all zeros for an empty text)."""
Vector = npt.NDArray[np.float32]
"""``(dim,)`` float32, L2-normalised."""

#: SPEC §8: a single provider operation over this many seconds means the provider is unavailable.
DEFAULT_LIMIT_S = 20.0
#: What a probe embeds.
PROBE_TEXT = "Almanac checks that its embedding provider answers."

_PROVIDERS: frozenset[str] = frozenset({"local", "vertex", "off", "remote"})
_STATES: frozenset[str] = frozenset({"ready", "not_set_up", "not_available"})

T = TypeVar("T")


@dataclass(frozen=True)
class ProviderStatus:
    """One provider's state, found by calling it once.

    ``detail`` says what went wrong and how to fix it (empty when ready); ``notes`` are the
    provider's own words about what it can and cannot do.
    """

    provider: ProviderName
    state: ProviderState
    model_id: str
    dim: int
    detail: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "state": self.state,
            "model_id": self.model_id,
            "dim": self.dim,
            "detail": self.detail,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProviderStatus:
        provider, state = str(data["provider"]), str(data["state"])
        if provider not in _PROVIDERS or state not in _STATES:
            raise ValueError(f"not a provider status: provider={provider!r} state={state!r}")
        return cls(
            provider=provider,  # type: ignore[arg-type]  # checked against _PROVIDERS above
            state=state,  # type: ignore[arg-type]  # checked against _STATES above
            model_id=str(data["model_id"]),
            dim=int(data["dim"]),
            detail=str(data.get("detail", "")),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of one model's space."""

    @property
    def provider(self) -> ProviderName: ...

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """``(len(texts), dim)`` float32, rows L2-normalised, in the order given."""
        ...

    def embed_query(self, text: str) -> Vector:
        """``(dim,)`` float32, L2-normalised."""
        ...

    def probe(self) -> ProviderStatus:
        """Call the provider once and report its state. Never raises."""
        ...


def l2_normalize(matrix: npt.NDArray[Any]) -> Matrix:
    """Rows scaled to unit length, as float32; an all-zero row stays zero."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-d array, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: Matrix = np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
    return out


def call_with_limit(fn: Callable[[], T], limit_s: float, what: str) -> T:
    """``fn()``, or :class:`ProviderTimeout` when it has not returned within ``limit_s``.

    The call runs on a daemon thread; a call that overruns is abandoned, not killed (it cannot be),
    and its eventual result is dropped.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"embed-limit:{what}", daemon=True).start()
    if not done.wait(limit_s):
        raise ProviderTimeout(
            f"{what} took longer than {limit_s:g} s, so the provider counts as unavailable; "
            "check the machine's load or the provider's reachability, then probe again"
        )
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def check_vector(vector: npt.NDArray[Any], dim: int) -> Vector:
    """``vector`` if it is a finite, unit-length float32 ``(dim,)`` array; ``EmbedError`` otherwise."""
    v = np.asarray(vector)
    if v.shape != (dim,) or v.dtype != np.float32 or not np.all(np.isfinite(v)):
        raise EmbedError(f"the provider returned a malformed vector (shape {v.shape}, dtype {v.dtype})")
    if dim and abs(float(np.linalg.norm(v)) - 1.0) > 1e-3:
        raise EmbedError("the provider returned a vector that is not L2-normalised")
    return v


def probe_embedder(
    embedder: Embedder,
    *,
    model_id: str,
    dim: int,
    notes: Sequence[str],
    limit_s: float = DEFAULT_LIMIT_S,
) -> ProviderStatus:
    """Embed :data:`PROBE_TEXT` once (within ``limit_s``) and report the state; never raises.

    ``model_id`` and ``dim`` are what the status reports when the call fails.
    """
    provider = embedder.provider
    try:
        vector = call_with_limit(lambda: embedder.embed_query(PROBE_TEXT), limit_s, f"{provider} probe")
        model_id, dim = embedder.model_id, embedder.dim
        check_vector(vector, dim)
    except EmbedError as exc:
        return ProviderStatus(provider, exc.state, model_id, dim, exc.message, tuple(notes))
    except Exception as exc:  # an unexpected failure is still an answer: the provider does not work
        detail = f"the provider failed unexpectedly: {type(exc).__name__}: {exc}"
        return ProviderStatus(provider, "not_available", model_id, dim, detail, tuple(notes))
    return ProviderStatus(provider, "ready", model_id, dim, "", tuple(notes))
