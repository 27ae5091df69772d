"""The host embedder service as a real subprocess on a Unix socket, and its app in process."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from starlette.testclient import TestClient

from engine.embed.errors import EmbedRequestError, ProviderNotAvailable
from engine.embed.local import DIM, MODEL_ID, LocalEmbedder
from engine.embed.off import OffEmbedder
from engine.embed.remote import RemoteEmbedder, UDSTransport
from engine.embed.service import DOCUMENT_NICE, ServiceAlreadyRunning, bind_socket, create_app

REPO = Path(__file__).resolve().parents[3]
TEXTS = ["The staging database moved to Frankfurt.", "Ship the release notes on Monday.", ""]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a Unix socket path must stay under 108 bytes."""
    with tempfile.TemporaryDirectory(prefix="alm-", dir="/tmp") as d:
        yield Path(d)


def _wait_healthy(sock: Path, proc: subprocess.Popen[bytes], deadline_s: float = 30.0) -> None:
    """Poll ``GET /healthz`` until it answers 200, the process dies, or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    with RemoteEmbedder(sock, timeout_s=1) as remote:
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"the service exited with {proc.returncode}"
            if remote.healthy():
                return
            time.sleep(0.05)  # poll interval of a bounded wait, not a fixed sleep
    raise AssertionError(f"the service did not answer /healthz within {deadline_s} s")


def _start(sock: Path, *options: str) -> subprocess.Popen[bytes]:
    """The service on ``sock``, with ``options`` (default: one ONNX Runtime thread)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.embed", "--socket", str(sock), *(options or ("--threads", "1"))],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _wait_healthy(sock, proc)
    return proc


def _stop(sock: Path, proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, err.decode()
    assert not sock.exists(), "the service left its socket file behind"


@pytest.fixture
def service(short_dir: Path) -> Iterator[Path]:
    sock = short_dir / "embed.sock"
    proc = _start(sock)
    try:
        yield sock
    finally:
        _stop(sock, proc)


@pytest.mark.req("embed:local")
@pytest.mark.req("embed:model-id")
def test_remote_vectors_equal_the_in_process_model(service: Path) -> None:
    assert stat.S_IMODE(os.stat(service).st_mode) == 0o600
    local = LocalEmbedder(threads=1)
    with RemoteEmbedder(service, timeout_s=20) as remote:
        assert (remote.provider, remote.model_id, remote.dim) == ("remote", MODEL_ID, DIM)
        docs = remote.embed_documents(TEXTS)
        query = remote.embed_query("where is the staging database?")
        status = remote.probe()
    assert docs.dtype == np.float32 and docs.shape == (3, DIM)
    assert np.allclose(docs, local.embed_documents(TEXTS), atol=1e-5)
    assert np.allclose(query, local.embed_query("where is the staging database?"), atol=1e-5)
    assert status.state == "ready" and status.provider == "remote" and status.model_id == MODEL_ID
    assert any("offline" in n.lower() for n in status.notes)
    assert status.notes[0] == "Computed by the embedder service this host's engines share."
    assert not any(str(service) in n for n in status.notes)  # no server path on an owner's page


@pytest.mark.req("embed:local")
def test_json_protocol_and_status(service: Path) -> None:
    with httpx.Client(transport=UDSTransport(str(service)), base_url="http://e", timeout=20) as c:
        body = c.post("/embed", json={"texts": TEXTS[:2], "kind": "document"}).json()
        status = c.get("/status").json()
        bad = c.post("/embed", json={"texts": "not a list"})
    assert body["model"] == MODEL_ID and body["dim"] == DIM
    vectors = np.asarray(body["vectors"], dtype=np.float32)
    assert np.allclose(vectors, LocalEmbedder(threads=1).embed_documents(TEXTS[:2]), atol=1e-5)
    assert status["state"] == "ready" and status["provider"] == "local" and status["dim"] == DIM
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"


@pytest.mark.req("embed:states")
def test_embeddings_keep_one_connection_per_thread_and_survive_a_restart(short_dir: Path) -> None:
    """``POST /embed`` goes through a plain HTTP connection kept per thread: a restarted service
    (the kept connection is dead) is reached again at once; an error answer keeps its code."""
    sock = short_dir / "embed.sock"
    proc = _start(sock)
    with RemoteEmbedder(sock, timeout_s=20) as remote:
        try:
            first = remote.embed_query("where is the staging database?")
            here = remote._embeds._local.conn
            assert remote.embed_query("x") is not None and remote._embeds._local.conn is here  # kept
            with ThreadPoolExecutor(1) as pool:
                assert pool.submit(remote.embed_query, "x").result(timeout=60) is not None
            assert len(remote._embeds._all) == 2
            with pytest.raises(EmbedRequestError, match="kind must be"):
                remote._embed(["x"], "neither")  # type: ignore[arg-type]
        finally:
            _stop(sock, proc)
        with pytest.raises(ProviderNotAvailable, match="not running"):
            remote.embed_query("where is the staging database?")
        proc = _start(sock)
        try:
            again = remote.embed_query("where is the staging database?")
        finally:
            _stop(sock, proc)
    assert again.tobytes() == first.tobytes()
    assert here.sock is None  # closed with the client


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.req("embed:background")
def test_a_query_is_answered_while_a_long_document_batch_is_still_being_embedded(short_dir: Path) -> None:
    """A query (a ``get_context`` someone waits for) goes before the rest of a document batch (an
    engine's background indexing): it waits for one slice at most, not for the whole batch. Without
    the queries' turn it is answered only after the batch. The batch's vectors are what the model
    gives each text alone."""
    sock = short_dir / "embed.sock"
    proc = _start(sock)
    # one request (the client sends at most 256 texts in one), long enough to be caught mid-way
    texts = [
        f"Note {i}: " + " ".join(f"the fjord deploy {i} step {k} is blue-green" for k in range(12))
        for i in range(250)
    ]
    try:
        with RemoteEmbedder(sock, timeout_s=600) as remote, ThreadPoolExecutor(1) as pool:
            remote.embed_query("warm up")
            busy, began = _cpu_seconds(proc.pid), time.monotonic()
            batch = pool.submit(remote.embed_documents, texts)
            deadline = began + 120
            while _cpu_seconds(proc.pid) - busy < 0.3:  # the batch is being embedded
                assert not batch.done() and time.monotonic() < deadline
                time.sleep(0.01)  # poll interval of a bounded wait
            asked = time.monotonic()
            query = remote.embed_query("where is the staging database?")
            answered = time.monotonic()
            vectors = batch.result(timeout=600)
            finished = time.monotonic()
    finally:
        _stop(sock, proc)
    # the query waited for a slice, not for the rest of the batch (most of its time)
    assert answered - asked < 0.25 * (finished - began), (answered - asked, finished - began)
    local = LocalEmbedder(threads=1)
    assert np.allclose(query, local.embed_query("where is the staging database?"), atol=1e-5)
    assert vectors.shape == (len(texts), DIM)
    assert np.allclose(vectors[::37], local.embed_documents(texts[::37]), atol=1e-5)


def _tasks(pid: int) -> dict[int, tuple[float, int]]:
    """Each thread of ``pid``: (CPU seconds so far, nice value), by thread id (Linux ``/proc``)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        found[int(task.name)] = (cpu, int(fields[16]))
    return found


@pytest.mark.req("embed:background")
@pytest.mark.req("perf:gateway")
@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own CPU priority is a Linux notion")
def test_document_batches_are_embedded_at_a_lower_cpu_priority_than_queries(short_dir: Path) -> None:
    """All of a document batch's work runs ``DOCUMENT_NICE`` nice steps below the service (with the
    default options: a second ONNX Runtime thread would be the pool's, at the service's priority),
    so on a busy host the calls people wait on get the cores first; a query is embedded beside the
    batch on a thread of the service's own priority."""
    sock = short_dir / "embed.sock"
    proc = _start(sock, "--batch-size", "32")  # the default thread count
    texts = [
        f"Note {i}: " + " ".join(f"the fjord deploy {i} step {k}" for k in range(12)) for i in range(400)
    ]
    try:
        base = os.getpriority(os.PRIO_PROCESS, proc.pid)
        with RemoteEmbedder(sock, timeout_s=600) as remote, ThreadPoolExecutor(1) as pool:
            remote.embed_query("warm up")
            before = _tasks(proc.pid)
            batch = pool.submit(remote.embed_documents, texts)
            deadline = time.monotonic() + 120
            while True:  # until one thread has spent 0.3 s of CPU on the batch
                spent = {t: cpu - before.get(t, (0.0, 0))[0] for t, (cpu, _) in _tasks(proc.pid).items()}
                if max(spent.values()) >= 0.3:
                    break
                assert not batch.done() and time.monotonic() < deadline
                time.sleep(0.01)  # poll interval of a bounded wait
            embedding = max(spent, key=lambda t: spent[t])
            lowered = min(19, base + DOCUMENT_NICE)
            now = _tasks(proc.pid)
            assert now[embedding][1] == lowered
            # no other thread (but the event loop's, which answers HTTP) did a share of the batch
            helpers = [t for t, s in spent.items() if s >= 0.1 and t not in (embedding, proc.pid)]
            assert all(now[t][1] == lowered for t in helpers), (helpers, now)
            asked = _tasks(proc.pid)
            for i in range(20):  # enough CPU for the clock's ticks to see where queries run
                remote.embed_query(f"where is the staging database of region {i}?")
            assert not batch.done()  # answered beside the batch, not after it
            after = _tasks(proc.pid)
            # the queries ran on a worker thread (not the event loop's) of the service's priority
            ran = [t for t, (cpu, nice) in after.items() if cpu > asked.get(t, (0.0, 0))[0] and nice == base]
            assert set(ran) - {proc.pid}, "no worker thread of the service's priority ran the queries"
            assert batch.result(timeout=600).shape == (len(texts), DIM)
    finally:
        _stop(sock, proc)


def test_a_second_service_on_the_same_socket_exits_3(service: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "engine.embed", "--socket", str(service)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3 and "already listens" in result.stderr


@pytest.mark.req("embed:states")
def test_no_service_is_not_available(short_dir: Path) -> None:
    with RemoteEmbedder(short_dir / "absent.sock", timeout_s=2) as remote:
        status = remote.probe()
        assert status.state == "not_available" and status.provider == "remote"
        assert "python -m engine.embed --socket" in status.detail
        with pytest.raises(ProviderNotAvailable):
            remote.embed_query("x")


def test_a_stale_socket_file_is_replaced(short_dir: Path) -> None:
    path = short_dir / "stale.sock"
    bind_socket(path).close()  # bound, then abandoned: the file stays, nobody listens
    assert path.exists()
    sock = bind_socket(path)
    try:
        with pytest.raises(ServiceAlreadyRunning):
            bind_socket(path)
    finally:
        sock.close()


def test_app_validates_requests() -> None:
    with TestClient(create_app(OffEmbedder())) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.post("/embed", content=b"{").status_code == 400
        assert client.post("/embed", json={"texts": ["a"], "kind": "poem"}).status_code == 400
        assert client.post("/embed", json={"texts": ["a"] * 5000}).status_code == 400
        ok = client.post("/embed", json={"texts": ["a", "b"], "kind": "query"}).json()
        assert ok == {"model": "off", "dim": 0, "vectors": [[], []]}


@pytest.mark.req("embed:states")
def test_app_reports_a_broken_model_as_503(tmp_path: Path) -> None:
    broken = LocalEmbedder(model_path=tmp_path / "missing.onnx")
    with TestClient(create_app(broken)) as client:
        response = client.post("/embed", json={"texts": ["a"]})
        status = client.get("/status").json()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "embed_not_available"
    assert status["state"] == "not_available"
