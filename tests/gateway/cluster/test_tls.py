"""Nodes that reach each other over TLS (``run:scale-out``; deploy/SCALING.md "TLS between nodes"):
node A advertises an ``https://`` URL served by a TLS terminator in front of it (a certificate from
a private CA, made here with ``cryptography``), and node B and the command line trust that CA through
``SSL_CERT_FILE``. A call through B is forwarded to A over TLS, and ``workspace usage`` asks A over
TLS; without the CA, the certificate is refused and nothing is sent."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.control.store import ControlPlane
from tests.gateway.cluster.nodes import Cluster, running
from tests.gateway.e2e import files_containing
from tests.pg import PostgresServer


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A private CA and a certificate it signed for 127.0.0.1: (CA, certificate, key) files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "almanac test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "node-a")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "node-a.pem", folder / "node-a.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


class _Terminator(ThreadingHTTPServer):
    """TLS in front of a node (as an ingress sidecar or a service mesh would be): requests arrive
    over TLS and go on to the node in plain HTTP on loopback, their ``Host`` kept."""

    def __init__(self, cert: Path, key: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Pass)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.target = ""
        self.served = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"


class _Pass(BaseHTTPRequestHandler):
    server: _Terminator

    def do_GET(self) -> None:
        self._pass()

    def do_POST(self) -> None:
        self._pass()

    def _pass(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = [(k, v) for k, v in self.headers.items() if k.lower() != "connection"]
        answer = httpx.request(
            self.command, self.server.target + self.path, headers=headers, content=body, timeout=60
        )
        self.server.served += 1
        self.send_response(answer.status_code)
        self.send_header("content-type", answer.headers.get("content-type", "application/json"))
        self.send_header("content-length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, format: str, *args: object) -> None:
        pass


class TlsCluster(Cluster):
    terminator: _Terminator

    def settings(self, name: str) -> dict[str, str]:
        found = super().settings(name)
        if name == "node-a":
            found["advertise_url"] = self.terminator.url
        return found


@pytest.fixture(scope="module")
def tls(
    postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TlsCluster, Path]]:
    root = tmp_path_factory.mktemp("tls")
    ca, cert, key = _certificates(root)
    terminator = _Terminator(cert, key)
    threading.Thread(target=terminator.serve_forever, daemon=True).start()
    cluster = TlsCluster(postgres.create_database(), root, {})
    cluster.terminator = terminator
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("SSL_CERT_FILE", str(ca))  # what the nodes' processes trust
            with running(cluster, ["node-a", "node-b"]) as started:
                terminator.target = started.nodes["node-a"].url
                yield started, ca
    finally:
        terminator.shutdown()
        terminator.server_close()


def _usage_on_b(cluster: Cluster, ca: Path | None) -> subprocess.CompletedProcess[str]:
    return cluster.admin(
        "node-b",
        *("workspace", "usage", "--owner", "ada@example.com"),
        env={} if ca is None else {"SSL_CERT_FILE": str(ca)},
        without=() if ca is not None else ("SSL_CERT_FILE",),
    )


@pytest.mark.req("run:scale-out")
def test_nodes_reach_each_other_over_tls_with_a_private_ca(tls: tuple[TlsCluster, Path]) -> None:
    cluster, ca = tls
    a, b = cluster.nodes["node-a"], cluster.nodes["node-b"]
    store = ControlPlane.connect(cluster.url, cluster.root / "unused.db")
    try:
        owner, workspace = store.owners.create("ada@example.com", None)
        token = store.connections.create_pat(owner.id, workspace.id, "ada's agent")[1]
    finally:
        store.close()
    assert str(cluster.rows("SELECT advertise_url FROM nodes WHERE name = %s", "node-a")[0][0]).startswith(
        "https"
    )
    stored = httpx.post(
        b.url + "/api/v1/memories",
        json={"statement": "the kiln is lit over TLS"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert stored.is_success, stored.text
    assert cluster.node_of(workspace.id) == "node-a"  # placed on A (ties by name), forwarded over TLS
    assert cluster.terminator.served >= 1
    assert files_containing(a.data_dir / "workspaces" / workspace.id, "the kiln is lit over TLS")
    # the command line's signed calls (the mover's client) go over TLS too
    used = _usage_on_b(cluster, ca)
    assert used.returncode == 0, used.stderr
    assert f"folder\t{a.data_dir / 'workspaces' / workspace.id}" in used.stdout
    # a client that does not trust the CA refuses A's certificate: nothing is sent
    served = cluster.terminator.served
    refused = _usage_on_b(cluster, None)
    assert refused.returncode == 1
    assert "node 'node-a' unavailable" in refused.stderr and "CERTIFICATE_VERIFY_FAILED" in refused.stderr
    assert cluster.terminator.served == served
