"""The workspace layer of settings on the admin surface (engine/admin/settings.py): pure checks, and
the real socket route of a real engine — read, refuse field by field, save, take effect on restart,
clear."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import settings as es
from engine.admin.settings import GROUPS, HELP, apply, coerce, describe, owner_view
from engine.embed.remote import RemoteEmbedder
from tests.engine.support import socket_engine

OFFERED = ("local", "off")


def test_every_setting_is_described_and_grouped_once() -> None:
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(es.NAMES) and len(grouped) == len(set(grouped))
    assert set(HELP) == set(es.NAMES)


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("half_life_days", " 90 ", 90.0),
        ("facts_share", "0.25", 0.25),
        ("notes_limit", "7", 7),
        ("include_archived", "TRUE", True),
        ("log_queries", "false", False),
        ("embedding_provider", "off", "off"),
        ("vertex_project", "", None),
        ("vertex_project", " my-proj ", "my-proj"),
        ("notes_limit", 9, 9),
    ],
)
def test_form_text_and_json_values_are_read_as_the_fields_kind(
    name: str, text: object, value: object
) -> None:
    assert coerce(name, text) == value


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("half_life_days", "0", "half_life_days 0.0 is out of range: use 1 to 3650"),
        ("notes_limit", "7.5", "notes_limit must be a whole number, not '7.5'"),
        ("facts_share", "lots", "facts_share must be a number, not 'lots'"),
        ("include_archived", "yes", "include_archived must be true or false, not 'yes'"),
        ("embedding_provider", "openai", "embedding_provider 'openai' is not one of local, vertex, off"),
        ("vertex_location", "", "vertex_location must be a non-empty string"),
        ("colour", "blue", "there is no setting called 'colour'"),
    ],
)
def test_bad_values_say_what_to_fix(name: str, text: str, why: str) -> None:
    with pytest.raises(es.LayerError) as refused:
        coerce(name, text)
    assert str(refused.value).startswith(why)


def test_apply_sets_clears_keeps_unknown_keys_and_refuses_by_field() -> None:
    layer = {"half_life_days": 30.0, "notes_limit": 500, "from_a_newer_build": 1}
    merged, errors = apply(layer, {"facts_limit": "5"}, ["half_life_days"], offered=OFFERED)
    assert errors == {}
    assert merged == {"facts_limit": 5, "from_a_newer_build": 1}  # the bad notes_limit is dropped
    merged, errors = apply(
        layer, {"facts_limit": "x", "notes_limit": "4", "min_match_score": "2"}, ["nope"], offered=OFFERED
    )
    assert set(errors) == {"facts_limit", "min_match_score", "nope"}
    assert "use 0.0 to 1.0" in errors["min_match_score"]


@pytest.mark.req("sec:authz")
def test_apply_refuses_what_decides_where_memories_go() -> None:
    layer = {"vertex_base_url": "http://127.0.0.1:9/", "half_life_days": 30.0}
    changes = {"vertex_base_url": "http://127.0.0.1:9/", "vertex_project": "theirs", "vertex_offered": "true"}
    merged, errors = apply(layer, changes, [], offered=OFFERED)
    assert set(errors) == {"vertex_base_url", "vertex_project", "vertex_offered"}
    assert all("the operator's to set" in why for why in errors.values())
    merged, errors = apply(layer, {"embedding_provider": "vertex"}, [], offered=OFFERED)
    assert errors == {"embedding_provider": es.not_offered("vertex", OFFERED)}
    assert "choose one of local, off" in errors["embedding_provider"]
    merged, errors = apply(layer, {"embedding_provider": "vertex"}, [], offered=es.PROVIDERS)
    assert errors == {} and merged == {"embedding_provider": "vertex", "half_life_days": 30.0}  # url dropped


def test_describe_tells_running_saved_and_inherited_apart() -> None:
    running = es.resolve({"half_life_days": 30}, None)
    on_disk = es.resolve({"half_life_days": 30}, {"half_life_days": 90, "notes_limit": 5})
    inherited = es.resolve({"half_life_days": 30}, None).settings
    reply = describe(running, on_disk, inherited, None)
    fields = {f["name"]: f for f in reply["fields"]}
    half = fields["half_life_days"]
    assert (half["value"], half["origin"], half["saved"], half["override"], half["inherited"]) == (
        30.0,
        "instance",
        90.0,
        True,
        30.0,
    )
    assert fields["facts_limit"]["origin"] == "default" and not fields["facts_limit"]["override"]
    assert reply["restart_needed"] is True
    assert describe(on_disk, on_disk, inherited, None)["restart_needed"] is False


def _client(sock: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost", timeout=30)


@pytest.mark.req("settings:layers", "settings:strict")
def test_the_socket_reads_refuses_saves_and_clears_the_workspace_layer(tmp_path: Path) -> None:
    ws, sock, instance = tmp_path / "ws", tmp_path / "e.sock", tmp_path / "instance.json"
    instance.write_text(json.dumps({"half_life_days": 30, "notes_limit": 10}))
    extra = ("--settings", str(instance), "--embedding-provider", "off")
    with socket_engine(ws, sock, *extra), _client(sock) as http:
        found = {f["name"]: f for f in http.get("/admin/settings").json()["fields"]}
        assert (found["half_life_days"]["value"], found["half_life_days"]["origin"]) == (30.0, "instance")
        assert found["embedding_provider"]["origin"] == "command line"
        assert found["max_tokens_default"]["origin"] == "default"

        refused = http.post(
            "/admin/settings", json={"set": {"half_life_days": "90", "max_tokens_default": "lots"}}
        )
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == "invalid_input"
        why = "max_tokens_default must be a whole number, not 'lots'"
        assert error["fields"] == {"max_tokens_default": why}
        assert not (ws / es.WORKSPACE_FILE).exists()  # nothing saved, not even the good field
        bad_bodies: list[object] = [[1], {"set": []}, {"set": {}, "clear": "x"}, {"other": 1}]
        for body in bad_bodies:
            assert http.post("/admin/settings", json=body).status_code == 400

        saved = http.post("/admin/settings", json={"set": {"half_life_days": "90", "log_queries": "true"}})
        assert saved.status_code == 200 and saved.json()["restart_needed"] is True
        half = next(f for f in saved.json()["fields"] if f["name"] == "half_life_days")
        assert (half["value"], half["saved"], half["override"]) == (30.0, 90.0, True)  # not live yet
        on_disk = json.loads((ws / es.WORKSPACE_FILE).read_text())
        assert on_disk == {"half_life_days": 90.0, "log_queries": True}

    with socket_engine(ws, sock, *extra), _client(sock) as http:  # a restart reads it
        reply = http.get("/admin/settings").json()
        found = {f["name"]: f for f in reply["fields"]}
        assert reply["restart_needed"] is False
        assert (found["half_life_days"]["value"], found["half_life_days"]["origin"]) == (90.0, "workspace")
        assert found["half_life_days"]["inherited"] == 30.0
        cleared = http.post("/admin/settings", json={"clear": ["half_life_days"]}).json()
        half = next(f for f in cleared["fields"] if f["name"] == "half_life_days")
        assert (half["saved"], half["override"], cleared["restart_needed"]) == (30.0, False, True)
        assert json.loads((ws / es.WORKSPACE_FILE).read_text()) == {"log_queries": True}


def test_a_broken_workspace_file_is_reported_and_replaced_by_the_next_save(tmp_path: Path) -> None:
    ws, sock = tmp_path / "ws", tmp_path / "e.sock"
    with socket_engine(ws, sock, "--embedding-provider", "off"), _client(sock) as http:
        (ws / es.WORKSPACE_FILE).write_text('{"notes_limit": 3,', encoding="utf-8")
        reply = http.get("/admin/settings").json()
        assert len(reply["problems"]) == 1 and "is not valid JSON" in reply["problems"][0]
        assert _field_of(reply, "notes_limit")["override"] is False
        saved = http.post("/admin/settings", json={"set": {"facts_limit": 4}}).json()
        assert saved["problems"] == [] and _field_of(saved, "facts_limit")["saved"] == 4
        assert json.loads((ws / es.WORKSPACE_FILE).read_text()) == {"facts_limit": 4}


def _field_of(reply: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in reply["fields"] if f["name"] == name)


@pytest.mark.req("embed:states", "settings:layers")
def test_the_provider_on_the_owners_page_names_no_server_path(tmp_path: Path) -> None:
    """The host's embedder service is down: its state and what to do reach the owner's Settings
    page, the socket's path does not (as in memory_status)."""
    down = tmp_path / "run" / "embed.sock"
    raw = RemoteEmbedder(down).probe().to_json()
    assert str(down) in raw["detail"]  # what the engine's own log says
    shown = owner_view(raw)
    assert shown["state"] == "not_available" and "<server path>" in shown["detail"]
    assert shown["notes"][0] == "Computed by the embedder service this host's engines share."
    assert str(tmp_path) not in json.dumps(shown)
