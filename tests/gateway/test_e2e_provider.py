"""The operator's embedding provider reaches the engines the gateway starts (``embed:vertex``).

A real gateway with ``engine_settings_file`` naming Vertex AI, the shared local embedder running
too, real engine processes, and the local fake Vertex server (predict + OAuth token endpoints);
credentials are Application Default Credentials from ``GOOGLE_APPLICATION_CREDENTIALS``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.engine.embed.fake_vertex import running_fake_vertex
from tests.gateway.e2e import connect, data, start_gateway, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def service_account(token_uri: str) -> dict[str, str]:
    """A service-account key file whose token endpoint is the fake's (a fresh key, made here)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "type": "service_account",
        "project_id": "adc-project",
        "private_key_id": "k1",
        "private_key": pem.decode(),
        "client_email": "almanac-tests@adc-project.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }


@pytest.mark.req("embed:vertex")
@pytest.mark.req("settings:layers")
async def test_a_gateway_started_engine_embeds_with_the_configured_vertex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_fake_vertex() as fake:
        adc = tmp_path / "adc.json"
        adc.write_text(json.dumps(service_account(fake.base_url + "/token")))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
        monkeypatch.setenv("NO_GCE_CHECK", "true")
        settings = tmp_path / "engine-settings.json"
        settings.write_text(
            json.dumps(
                {
                    "embedding_provider": "vertex",
                    "vertex_project": "proj-gw",
                    "vertex_location": "europe-west4",
                    "vertex_base_url": fake.base_url,
                    "vertex_batch_size": 8,
                }
            )
        )
        gw = start_gateway(
            tmp_path / "data", tmp_path / "gateway.log", embedder="true", engine_settings_file=str(settings)
        )
        try:
            gw.owner("vera@example.com")
            token = gw.token("vera@example.com", "vera")
            async with connect(gw, token) as c:
                data(await c.call_tool("remember", {"statement": "The puffin cluster serves search."}))

                def embedded_by_vertex() -> bool:
                    return any(
                        i["content"] == "The puffin cluster serves search."
                        and i.get("task_type") == "RETRIEVAL_DOCUMENT"
                        for r in fake.requests
                        for i in r["body"]["instances"]
                    )

                wait_for(embedded_by_vertex, timeout=60, what="the note to be embedded by the fake Vertex")
                status = data(await c.call_tool("memory_status", {}))
                assert status["embedding"]["provider"] == "vertex"
                assert status["settings"]["embedding_provider"] == "vertex"
                assert status["settings_origin"]["embedding_provider"] == "instance"
                assert status["index"]["model_id"] == "vertex:gemini-embedding-001@768"
            request = next(r for r in fake.requests if r["body"]["instances"])
            assert request["params"]["project"] == "proj-gw"
            assert request["params"]["location"] == "europe-west4"
            assert request["headers"]["authorization"] == "Bearer fake-access-token"
            assert (
                fake.tokens and fake.tokens[0]["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
            )
        finally:
            gw.stop()
