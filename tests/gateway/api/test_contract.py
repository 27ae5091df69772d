"""The REST service and its own OpenAPI document agree (gw:rest, rel:fuzz): schemathesis against a
real gateway finds nothing, and every operation refuses what it was not asked to take."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.api.openapi import document
from tests.gateway.api.test_rest import ADA, BOB, gateway_of_ada_and_bob
from tests.gateway.e2e import Gateway, files_containing

pytestmark = pytest.mark.req("gw:rest")

HERE = Path(__file__).parent
SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")
#: Written into every request these tests refuse; no file of the workspace may ever hold it.
SENTINEL = "contract-sentinel-7f3a"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from gateway_of_ada_and_bob(tmp_path_factory.mktemp("contract"), "100000")


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, spec)
        for path, methods in document()["paths"].items()
        for method, spec in methods.items()
    ]


def _cases(operations: list[tuple[str, str, dict[str, Any]]]) -> list[Any]:
    return [pytest.param(method, path, spec, id=f"{method} {path}") for method, path, spec in operations]


def _json_body(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON body schema of an operation, or None when it takes none (or not JSON)."""
    content = spec.get("requestBody", {}).get("content", {})
    found = content.get("application/json", {}).get("schema")
    return found if isinstance(found, dict) else None


def _valid_body(schema: dict[str, Any]) -> dict[str, Any]:
    """A body that would be accepted: each required field (all strings in these tools) set."""
    return {name: SENTINEL for name in schema.get("required", [])}


@pytest.fixture(scope="module")
def targets(gateway: Gateway) -> dict[str, str]:
    """Real ids for the paths' {id} (a live memory, a spare connection of the same workspace), and
    the workspace's folder."""
    token = gateway.token(ADA, "Contract script")
    spare = gateway.token(ADA, "Contract spare")
    made = httpx.post(
        gateway.url + "/api/v1/memories",
        json={"statement": "The contract test's own memory."},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    ).json()
    listed = httpx.get(
        gateway.url + "/api/v1/admin/connections", headers={"Authorization": f"Bearer {token}"}, timeout=60
    ).json()["connections"]
    (spare_id,) = [c["id"] for c in listed if c["name"] == "Contract spare"]
    folder = str(gateway.workspace_dir(ADA))
    return {"token": token, "spare": spare, "memory": made["id"], "connection": spare_id, "folder": folder}


def _url(gateway: Gateway, path: str, targets: dict[str, str]) -> str:
    which = targets["connection"] if "/connections/" in path else targets["memory"]
    return gateway.url + path.replace("{id}", which)


@pytest.mark.parametrize(
    ("method", "path", "spec"), _operations(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_an_unknown_query_parameter_is_refused_by_name(
    gateway: Gateway, targets: dict[str, str], method: str, path: str, spec: dict[str, Any]
) -> None:
    """Every operation of the document (a new one is covered by being documented): 400
    invalid_input naming the parameter and what the operation takes, and nothing is done."""
    body = _json_body(spec)
    kwargs: dict[str, Any] = {} if body is None else {"json": _valid_body(body)}
    reply = httpx.request(
        method,
        _url(gateway, path, targets),
        params={"colour": SENTINEL},
        headers={"Authorization": f"Bearer {targets['token']}"},
        timeout=60,
        **kwargs,
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "invalid_input" and "unknown query parameter 'colour'" in error["message"]
    declared = [p["name"] for p in spec.get("parameters", []) if p["in"] == "query"]
    assert error["message"].endswith("this operation takes: " + (", ".join(sorted(declared)) or "none"))
    assert files_containing(Path(targets["folder"]), SENTINEL) == []
    assert _still_works(gateway, targets)


def _still_works(gateway: Gateway, targets: dict[str, str]) -> bool:
    """The memory is live and the spare connection not revoked."""
    memory = httpx.get(
        f"{gateway.url}/api/v1/admin/memories/{targets['memory']}",
        headers={"Authorization": f"Bearer {targets['spare']}"},
        timeout=60,
    )
    return memory.status_code == 200 and memory.json()["item"]["state"] == "live"


def test_a_parameter_given_twice_is_refused(gateway: Gateway, targets: dict[str, str]) -> None:
    reply = httpx.get(
        gateway.url + "/api/v1/memories?subject=a&subject=b",
        headers={"Authorization": f"Bearer {targets['token']}"},
        timeout=60,
    )
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "invalid_input"
    assert "'subject' is given twice" in reply.json()["error"]["message"]


def test_the_document_itself_takes_no_query_parameter(gateway: Gateway) -> None:
    reply = httpx.get(gateway.url + "/api/v1/openapi.json", params={"colour": "red"}, timeout=60)
    assert reply.status_code == 400 and "unknown query parameter 'colour'" in reply.json()["error"]["message"]


JSON_BODIES = [(m, p, s) for m, p, s in _operations() if _json_body(s) is not None]


@pytest.mark.parametrize(
    ("method", "path", "spec"), JSON_BODIES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_an_unknown_body_field_is_refused_by_name(
    gateway: Gateway, targets: dict[str, str], method: str, path: str, spec: dict[str, Any]
) -> None:
    schema = _json_body(spec)
    assert schema is not None and schema.get("additionalProperties") is False  # the document says so too
    reply = httpx.request(
        method,
        _url(gateway, path, targets),
        json={**_valid_body(schema), "colour": SENTINEL},
        headers={"Authorization": f"Bearer {targets['token']}"},
        timeout=60,
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "invalid_input" and "unknown field(s) colour" in error["message"]
    takes = ", ".join(sorted(schema.get("properties", {}))) or "none"
    assert error["message"].endswith(f"this operation takes: {takes}")
    assert files_containing(Path(targets["folder"]), SENTINEL) == []
    assert _still_works(gateway, targets)


def test_a_body_field_of_the_wrong_json_type_is_refused_not_coerced(
    gateway: Gateway, targets: dict[str, str]
) -> None:
    for path, body, field in (
        ("/memories", {"statement": SENTINEL, "importance": False}, "importance must be number or null"),
        ("/memories", {"statement": SENTINEL, "importance": "0.5"}, "importance must be number or null"),
        ("/context", {"query": SENTINEL, "include_archived": 0}, "include_archived must be boolean or null"),
    ):
        reply = httpx.post(
            gateway.url + "/api/v1" + path,
            json=body,
            headers={"Authorization": f"Bearer {targets['token']}"},
            timeout=60,
        )
        assert reply.status_code == 400, reply.text
        assert (
            reply.json()["error"]["code"] == "invalid_argument" and field in reply.json()["error"]["message"]
        )
    assert files_containing(Path(targets["folder"]), SENTINEL) == []


def test_a_method_the_path_does_not_serve_is_405_with_allow(gateway: Gateway) -> None:
    reply = httpx.request("PUT", gateway.url + "/api/v1/memories", timeout=60)
    assert reply.status_code == 405 and reply.headers["allow"] == "GET, HEAD, POST"
    assert reply.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.req("rel:fuzz")
def test_schemathesis_finds_no_disagreement(gateway: Gateway, tmp_path: Path) -> None:
    """Every operation, valid and invalid requests (examples, coverage, fuzzing) and the document's
    links (stateful), deterministic and bounded: no server error, and every status, content type,
    header and body is the one the document declares. Left out: 'schema-valid data is accepted'
    (the tools refuse what JSON Schema cannot say — control characters, a fact with only some of its
    parts — with a clean 400)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ALMANAC_")},
        "SCHEMATHESIS_HOOKS": "tests.gateway.api.schemathesis_hooks",
        "ALMANAC_CONTRACT_TOKEN": gateway.token(ADA, "Schemathesis"),
        "ALMANAC_CONTRACT_OTHER_TOKEN": gateway.token(BOB, "Schemathesis"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", str(HERE.parents[2])),
    }
    done = subprocess.run(
        [
            SCHEMATHESIS,
            "--config-file",
            str(HERE / "schemathesis.toml"),
            "run",
            gateway.url + "/api/v1/openapi.json",
            "--max-examples=15",
            "--generation-deterministic",
            "--workers=1",
            "--checks=all",
            "--exclude-checks=positive_data_acceptance",
            "--suppress-health-check=all",
            "--request-timeout=60",
            "--continue-on-failure",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    said = done.stdout[-20_000:] + done.stderr[-5_000:]
    assert done.returncode == 0, said
    operations = len(_operations())
    assert f"{operations} selected / {operations} total" in done.stdout, said
    covered = re.search(r"API Links:\s+(\d+) covered", done.stdout)
    assert covered is not None and int(covered.group(1)) > 0, said  # the stateful phase followed links
    assert re.search(r"\d+ generated, \d+ passed", done.stdout), said
