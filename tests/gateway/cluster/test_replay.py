"""The replay cache of the signed calls between nodes: each nonce accepted once within the
signature's window, in bounded memory."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cluster.replay import ReplayCache, Replayed
from gateway.control.store import ControlPlane
from tests.gateway.cluster.nodes import Cluster, started_nodes
from tests.gateway.e2e import Gateway, connect, data, wait_for

WINDOW = 30.0


@pytest.mark.req("run:scale-out")
def test_a_nonce_is_refused_within_the_window_and_forgotten_after_it() -> None:
    seen = ReplayCache(WINDOW)
    seen.admit("n1", 1000, now=1000)
    with pytest.raises(Replayed, match="already received"):
        seen.admit("n1", 1000, now=1000 + WINDOW)
    # past the window its timestamp alone refuses the call (the signature check): nothing is kept
    seen.admit("n2", 1031, now=1031)
    assert len(seen) == 1


@pytest.mark.req("run:scale-out")
def test_a_full_cache_forgets_the_oldest_and_refuses_calls_as_old_as_it() -> None:
    seen = ReplayCache(WINDOW, max_entries=3)
    for i, stamp in enumerate((100, 101, 102)):
        seen.admit(f"n{i}", stamp, now=102)
    seen.admit("n3", 103, now=103)  # n0 (signed at 100) is forgotten
    assert len(seen) == 3
    with pytest.raises(Replayed, match="more signed calls"):
        seen.admit("n0", 100, now=103)  # its replay is still refused
    seen.admit("n4", 104, now=104)  # a fresh call passes


@given(
    st.lists(
        st.tuples(st.sampled_from([f"n{i}" for i in range(8)]), st.integers(0, 40), st.integers(0, 40)),
        max_size=60,
    ),
    st.integers(1, 6),
)
def test_no_nonce_is_ever_admitted_twice_within_its_window(
    calls: list[tuple[str, int, int]], capacity: int
) -> None:
    """Whatever the capacity and the order: a captured call (its nonce and timestamp t: both are
    signed) is never admitted again while t is within the window (``now <= t + window``), and memory
    stays bounded."""
    seen = ReplayCache(10.0, max_entries=capacity)
    admitted: set[tuple[str, int]] = set()
    now = 0
    for nonce, stamp, step in calls:
        now += step // 10
        if abs(now - stamp) > 10:  # the signature check refuses it before the cache is asked
            continue
        try:
            seen.admit(nonce, stamp, now)
        except Replayed:
            continue
        assert (nonce, stamp) not in admitted
        admitted.add((nonce, stamp))
        assert len(seen) <= capacity


class _Relay(ThreadingHTTPServer):
    """A relay in front of a node that keeps a copy of every request it passes on (what someone on
    the network between two nodes could capture)."""

    def __init__(self, target: str) -> None:
        super().__init__(("127.0.0.1", 0), _Pass)
        self.target = target
        self.captured: list[tuple[str, str, list[tuple[str, str]], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Pass(BaseHTTPRequestHandler):
    server: _Relay

    def do_GET(self) -> None:
        self._pass()

    def do_POST(self) -> None:
        self._pass()

    def _pass(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in ("host", "connection")]
        self.server.captured.append((self.command, self.path, headers, body))
        answer = httpx.request(
            self.command, self.server.target + self.path, headers=headers, content=body, timeout=60
        )
        self.send_response(answer.status_code)
        self.send_header("content-type", answer.headers.get("content-type", "application/json"))
        self.send_header("content-length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, format: str, *args: object) -> None:
        pass


cluster = started_nodes("cluster", "replay", ("node-a", "node-b"), Cluster)


@pytest.mark.anyio
@pytest.mark.req("run:scale-out")
async def test_a_captured_signed_call_replayed_to_a_real_node_is_refused(cluster: Cluster) -> None:
    """Node B forwards a REST write to node A through a relay that captures it; the captured call,
    sent to A again as it was, is refused 401 ``cluster_signature_replayed`` and stores nothing; a
    fresh call, signed anew by B, is served."""
    a = cluster.nodes["node-a"]
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        owner, workspace = store.owners.create("ada@example.com", None)
        token = store.connections.create_pat(owner.id, workspace.id, "ada's agent")[1]
    finally:
        store.close()
    auth = {"Authorization": f"Bearer {token}"}
    b = cluster.nodes["node-b"]
    async with connect(b, token) as client:  # placed on node-a (ties by name)
        data(await client.call_tool("remember", {"statement": "the kiln is lit"}))
    assert cluster.node_of(workspace.id) == "node-a"
    relay = _Relay(a.url)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    try:
        _advertise(cluster, "node-a", relay.url)
        tries = iter(range(1_000))

        def store_through_b(subject: str) -> httpx.Response:
            fact = {"statement": f"{subject} is fired at 1240 C", "subject": subject, "predicate": "fired at"}
            return httpx.post(
                b.url + "/api/v1/memories", json={**fact, "object": "1240 C"}, headers=auth, timeout=60
            )

        # B reads A's address anew within half a second: wait until its calls go through the relay
        wait_for(
            lambda: store_through_b(f"Glaze {next(tries)}").is_success and bool(relay.captured),
            what="a forwarded call captured",
        )
        method, path, headers, body = next(c for c in reversed(relay.captured) if c[0] == "POST")
        assert dict(headers)["x-almanac-cluster-signature"].startswith("v2 t=")
        captured = json.loads(body)["subject"]
        assert _facts(b, auth, captured) == 1
        replayed = httpx.request(method, a.url + path, headers=headers, content=body, timeout=60)
        assert replayed.status_code == 401, replayed.text
        assert replayed.json()["error"]["code"] == "cluster_signature_replayed"
        assert _facts(b, auth, captured) == 1  # nothing stored twice
        fresh = store_through_b("Glaze fresh")
        assert fresh.is_success, fresh.text
        assert _facts(b, auth, "Glaze fresh") == 1
    finally:
        _advertise(cluster, "node-a", a.url)
        relay.shutdown()
        relay.server_close()


def _facts(node: Gateway, auth: dict[str, str], subject: str) -> int:
    """How many facts the workspace holds about ``subject``."""
    found = httpx.get(node.url + "/api/v1/memories", params={"subject": subject}, headers=auth, timeout=60)
    assert found.is_success, found.text
    return len(found.json()["facts"])


def _advertise(cluster: Cluster, node: str, url: str) -> None:
    """Where the other nodes reach ``node`` from now on (as its next start would record)."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(b"UPDATE nodes SET advertise_url = %s WHERE name = %s", (url, node))
