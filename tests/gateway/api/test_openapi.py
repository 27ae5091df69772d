"""The REST API's operations and OpenAPI document (gw:rest), without a server."""

from __future__ import annotations

import anyio
import pytest

from gateway.api.admin import ADMIN_OPERATIONS
from gateway.api.openapi import OPERATIONS, PREFIX, document, tools
from gateway.api.owner import OPERATION_IDS as OWNER_OPERATIONS
from gateway.api.rest import arguments_from_body, arguments_from_query
from tests.gateway.api.snapshot import SNAPSHOT, listed_tools, render

pytestmark = pytest.mark.req("gw:rest")


def test_the_tool_snapshot_is_what_a_real_engine_lists() -> None:
    """The gateway cannot import the engine; this keeps its copy of the schemas honest.
    Regenerate with `python -m tests.gateway.api.snapshot --write`."""
    assert SNAPSHOT.read_text(encoding="utf-8") == render(anyio.run(listed_tools))


def test_every_tool_has_an_operation() -> None:
    assert {op.tool for op in OPERATIONS} == set(tools())


def test_the_document_names_every_operation_with_the_tools_schemas() -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1")
    ids = [spec["operationId"] for path in doc["paths"].values() for spec in path.values()]
    transfer = ["export_workspace", "import_workspace"]
    expected = len(OPERATIONS) + len(ADMIN_OPERATIONS) + len(transfer) + len(OWNER_OPERATIONS)
    assert len(ids) == expected == len(set(ids))
    assert set(transfer) <= set(ids) and set(OWNER_OPERATIONS) <= set(ids)
    remember = doc["paths"][PREFIX + "/memories"]["post"]["requestBody"]["content"]["application/json"]
    assert remember["schema"]["required"] == ["statement"]
    assert remember["schema"]["additionalProperties"] is False
    assert "#/$defs/" not in str(doc)  # every nested schema points into components
    # erasing the account is only on its page (an owner signed in), never for a bearer token
    assert not [p for p in doc["paths"] if "account" in p or "erase" in p]


def test_query_arguments_are_typed_and_unknown_ones_refused() -> None:
    by_subject = next(op for op in OPERATIONS if op.path == "/memories" and op.method == "GET")
    assert arguments_from_query(by_subject, [("subject", "Fjord"), ("include_history", "TRUE")]) == {
        "subject": "Fjord",
        "include_history": True,
    }
    with pytest.raises(ValueError, match="true or false"):
        arguments_from_query(by_subject, [("include_history", "yes")])
    with pytest.raises(ValueError, match="unknown query parameter 'subjet'; this operation takes: as_of"):
        arguments_from_query(by_subject, [("subjet", "Fjord")])
    with pytest.raises(ValueError, match="given twice"):
        arguments_from_query(by_subject, [("subject", "a"), ("subject", "b")])


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[1]", "JSON object"),
        (b"{not json", "JSON object"),
        (b'{"statement": "x", "colour": "red"}', "unknown field"),
        (b'{"id": "nte_x", "statement": "x"}', "unknown field"),  # ids travel in the path
    ],
)
def test_bodies_must_be_objects_of_the_tools_fields(body: bytes, why: str) -> None:
    remember = next(op for op in OPERATIONS if op.tool == "remember")
    with pytest.raises(ValueError, match=why):
        arguments_from_body(remember, body)


def test_a_writes_reply_links_its_id_to_the_memorys_other_operations() -> None:
    paths = document()["paths"]
    links = paths[PREFIX + "/memories"]["post"]["responses"]["200"]["links"]
    assert {link["operationId"] for link in links.values()} == {
        "retrieve_memory_by_id",
        "retire_memory",
        "restore_memory",
        "list_memory_by_id",
    }
    assert {link["parameters"]["id"] for link in links.values()} == {"$response.body#/id"}
    ids = {spec["operationId"] for methods in paths.values() for spec in methods.values()}
    every = [
        link["operationId"]
        for methods in paths.values()
        for spec in methods.values()
        for link in spec["responses"]["200"].get("links", {}).values()
    ]
    assert set(every) <= ids  # every link leads to an operation of the document


def test_every_operation_declares_its_errors_in_the_one_envelope() -> None:
    for methods in document()["paths"].values():
        for spec in methods.values():
            errors = {code: r for code, r in spec["responses"].items() if code != "200"}
            assert {"400", "401", "403", "429", "503"} <= set(errors), spec["operationId"]
            for reply in errors.values():
                assert reply["content"]["application/json"]["schema"]["required"] == ["error"]
