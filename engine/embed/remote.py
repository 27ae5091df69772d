"""``RemoteEmbedder``: the engine's client of the host embedder service (``docs/embedder-service.md``).

The service (:mod:`engine.embed.service`) holds the one local model of the host; engines call it
over its Unix socket. Vectors travel as raw little-endian float32. ``model_id`` and ``dim`` are the
service's, asked once (``GET /status``) and remembered. ``POST /embed`` — a query embedding on
every hybrid search — goes through a plain :mod:`http.client` connection kept per thread
(:class:`_EmbedConnections`): httpx spent 1.83 ms CPU per query embedding against 0.59 ms for the
same request (docs/benchmarks.md); the other, rare requests use httpx.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

import httpcore
import httpx
import numpy as np
from httpcore._backends.sync import SyncStream

from engine.embed.base import DEFAULT_LIMIT_S, Matrix, ProviderName, ProviderStatus, Vector, probe_embedder
from engine.embed.errors import (
    BY_CODE,
    EmbedError,
    EmbedRequestError,
    ProviderNotAvailable,
    ProviderTimeout,
)

BINARY: Final = "application/octet-stream"
#: Response headers of a binary ``POST /embed``.
H_MODEL: Final = "x-embed-model"
H_DIM: Final = "x-embed-dim"
H_COUNT: Final = "x-embed-count"
Kind = Literal["document", "query"]


class _ClosingUDSBackend(httpcore.SyncBackend):
    """httpcore 1.0's backend leaves the socket open when ``connect()`` fails (one ResourceWarning
    per failed attempt, e.g. while the service is down); this one closes it."""

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
            sock.settimeout(timeout)
            sock.connect(path)
        except TimeoutError as exc:
            sock.close()
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return SyncStream(sock)


class UDSTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport(uds=path)`` that closes its socket when a connection attempt fails."""

    def __init__(self, path: str) -> None:
        super().__init__(uds=path)
        self._pool = httpcore.ConnectionPool(uds=path, network_backend=_ClosingUDSBackend())


class _UnixConnection(http.client.HTTPConnection):
    """An HTTP/1.1 connection over a Unix socket: ``connect_timeout_s`` to connect, then
    ``timeout_s`` for each request."""

    def __init__(self, path: str, timeout_s: float, connect_timeout_s: float) -> None:
        super().__init__("embedder", timeout=timeout_s)
        self.path = path
        self.connect_timeout_s = connect_timeout_s

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.connect_timeout_s)
            sock.connect(self.path)
            sock.settimeout(self.timeout)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class _EmbedConnections:
    """One kept :class:`_UnixConnection` per thread (the indexer's batches and the queries share
    the embedder), each reconnected when the service closed it."""

    def __init__(self, path: str, timeout_s: float, connect_timeout_s: float) -> None:
        self.path, self.timeout_s, self.connect_timeout_s = path, timeout_s, connect_timeout_s
        self._local = threading.local()
        self._all: list[_UnixConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def post(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """``(status, headers, body)`` of one POST. A kept connection the service has closed (an
        idle timeout, a restart) is replaced and the request sent once more on a new one; the
        request must be safe to repeat (an embedding is)."""
        if self._closed:
            raise ConnectionError("the embedder client is closed")
        conn: _UnixConnection | None = getattr(self._local, "conn", None)
        kept = conn is not None
        if conn is None:
            conn = self._new()
        while True:
            try:
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                return response.status, response.headers, response.read()
            except TimeoutError:
                conn.close()
                raise
            except (OSError, http.client.HTTPException):
                conn.close()
                if not kept:
                    raise
                kept = False  # the kept connection was stale: one more try on a new one

    def _new(self) -> _UnixConnection:
        conn = _UnixConnection(self.path, self.timeout_s, self.connect_timeout_s)
        with self._lock:
            if self._closed:
                raise ConnectionError("the embedder client is closed")
            self._all.append(conn)
        self._local.conn = conn
        return conn

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


class RemoteEmbedder:
    """An :class:`~engine.embed.base.Embedder` that asks the host embedder service on ``socket_path``."""

    def __init__(
        self,
        socket_path: Path | str,
        *,
        timeout_s: float = DEFAULT_LIMIT_S,
        connect_timeout_s: float = 2.0,
        max_texts: int = 256,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.timeout_s = timeout_s
        self.max_texts = max_texts
        self._http = httpx.Client(
            transport=UDSTransport(str(self.socket_path)),
            base_url="http://embedder",
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
        )
        self._embeds = _EmbedConnections(str(self.socket_path), timeout_s, connect_timeout_s)
        self._identity: tuple[str, int] | None = None
        self._lock = threading.Lock()

    @property
    def provider(self) -> ProviderName:
        return "remote"

    @property
    def model_id(self) -> str:
        return self._ident()[0]

    @property
    def dim(self) -> int:
        return self._ident()[1]

    def healthy(self) -> bool:
        """Whether the service answers ``GET /healthz`` (it is up and its model is loaded)."""
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def service_status(self) -> ProviderStatus:
        """The service's own provider status (it probes its model); raises if it cannot be asked."""
        response = self._request("GET", "/status")
        return ProviderStatus.from_json(response.json())

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._embed(list(texts[i : i + self.max_texts]), "document")
            for i in range(0, len(texts), self.max_texts)
        ]
        return np.concatenate(parts)

    def embed_query(self, text: str) -> Vector:
        row: Vector = self._embed([text], "query")[0]
        return row

    def probe(self) -> ProviderStatus:
        """The service's status, confirmed by one real ``/embed`` call through the socket."""
        notes: tuple[str, ...] = ("Computed by the embedder service this host's engines share.",)
        try:
            inner = self.service_status()
        except EmbedError as exc:
            return ProviderStatus("remote", exc.state, "unknown", 0, exc.message, notes)
        notes = notes + inner.notes
        if not inner.ready:
            return ProviderStatus("remote", inner.state, inner.model_id, inner.dim, inner.detail, notes)
        return probe_embedder(
            self, model_id=inner.model_id, dim=inner.dim, notes=notes, limit_s=self.timeout_s
        )

    def close(self) -> None:
        self._embeds.close()
        self._http.close()

    def __enter__(self) -> RemoteEmbedder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    def _ident(self) -> tuple[str, int]:
        with self._lock:
            if self._identity is None:
                status = self.service_status()
                if not status.ready:
                    raise BY_CODE.get(f"embed_{status.state}", ProviderNotAvailable)(status.detail)
                self._identity = (status.model_id, status.dim)
            return self._identity

    def _embed(self, texts: list[str], kind: Kind) -> Matrix:
        request = json.dumps({"texts": texts, "kind": kind}).encode()
        headers = {"content-type": "application/json", "accept": BINARY}
        try:
            status, answer, body = self._embeds.post("/embed", request, headers)
        except TimeoutError as exc:
            raise self._timeout() from exc
        except (OSError, http.client.HTTPException) as exc:
            raise self._not_running(exc) from exc
        if status != 200:
            raise _error_from_body(status, body)
        model, dim_text, count_text = (answer.get(h) for h in (H_MODEL, H_DIM, H_COUNT))
        try:
            if model is None or dim_text is None or count_text is None:
                raise KeyError(H_MODEL if model is None else H_DIM if dim_text is None else H_COUNT)
            dim, count = int(dim_text), int(count_text)
        except (KeyError, ValueError) as exc:
            raise EmbedRequestError(f"the embedder service sent no vector headers ({exc})") from exc
        if count != len(texts) or len(body) != 4 * dim * count:
            raise EmbedRequestError(
                f"the embedder service answered {count} vectors / {len(body)} bytes for {len(texts)} texts"
            )
        with self._lock:
            if self._identity is not None and self._identity != (model, dim):
                raise EmbedRequestError(
                    f"the embedder service changed model ({self._identity[0]} → {model}); "
                    "restart the engine so it re-embeds with the new model"
                )
            self._identity = (model, dim)
        return np.frombuffer(body, dtype="<f4").reshape(count, dim).astype(np.float32)

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise self._timeout() from exc
        except httpx.TransportError as exc:
            raise self._not_running(exc) from exc
        if response.status_code != 200:
            raise _error_from_body(response.status_code, response.content)
        return response

    def _timeout(self) -> ProviderTimeout:
        return ProviderTimeout(
            f"the embedder service on {self.socket_path} did not answer within {self.timeout_s:g} s; "
            "check that it is not overloaded or stuck, or restart it"
        )

    def _not_running(self, exc: Exception) -> ProviderNotAvailable:
        return ProviderNotAvailable(
            f"the embedder service is not running on {self.socket_path} ({exc}); start it with "
            f"`python -m engine.embed --socket {self.socket_path}`"
        )


def _error_from_body(status: int, body: bytes) -> EmbedError:
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "", body[:200].decode("utf-8", "replace")
    cls = BY_CODE.get(code, EmbedRequestError)
    return cls(f"embedder service: {message} (HTTP {status})")
