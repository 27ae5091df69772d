"""Layered engine settings (``settings:layers``, ``settings:strict``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from engine import settings
from engine.server import embedder_for, recall_settings


@pytest.mark.req("settings:layers")
def test_a_workspace_value_wins_field_by_field_and_the_rest_falls_to_defaults() -> None:
    loaded = settings.resolve({"half_life_days": 30, "top_k": 7, "notes_limit": 10}, {"half_life_days": 90})
    assert loaded.settings.half_life_days == 90.0
    assert loaded.settings.notes_limit == 10
    assert loaded.settings.max_tokens_default == settings.EngineSettings().max_tokens_default
    assert loaded.origin["half_life_days"] == "workspace"
    assert loaded.origin["notes_limit"] == "instance"
    assert loaded.origin["max_tokens_default"] == "default"
    assert loaded.problems == ()


@pytest.mark.req("settings:layers")
def test_every_field_has_a_default_within_its_own_range() -> None:
    defaults = settings.EngineSettings()
    assert (defaults.half_life_days, defaults.include_archived) == (60, False)
    assert defaults.max_tokens_default == 800
    assert (defaults.facts_share, defaults.embedding_provider) == (0.5, "local")
    for f in settings.FIELDS:
        assert settings.check_layer({f.name: getattr(defaults, f.name)}) == {
            f.name: getattr(defaults, f.name)
        }


@pytest.mark.req("settings:strict")
@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"half_life_days": 0}, "out of range: use 1 to 3650"),
        ({"half_life_days": 3651}, "out of range"),
        ({"include_archived": "yes"}, "true or false"),
        ({"max_tokens_default": 800.5}, "whole number"),
        ({"notes_limit": True}, "whole number"),
        ({"embedding_provider": "openai"}, "not one of local, vertex, off"),
        ({"facts_share": "half"}, "must be a number"),
    ],
)
def test_a_layer_with_a_bad_value_is_discarded_whole(bad: dict[str, object], says: str) -> None:
    instance = {"half_life_days": 30, "notes_limit": 9}
    workspace = {"facts_share": 0.25, **bad}
    loaded = settings.resolve(instance, workspace)
    assert loaded.settings.facts_share == 0.5  # the good value of the bad layer is not used either
    assert loaded.settings.half_life_days == 30.0 and loaded.settings.notes_limit == 9
    assert loaded.origin["facts_share"] == "default"
    assert len(loaded.problems) == 1
    assert "workspace settings were ignored" in loaded.problems[0] and says in loaded.problems[0]


@pytest.mark.req("settings:strict")
def test_an_unknown_key_is_ignored_and_the_layer_still_works() -> None:
    loaded = settings.resolve(None, {"from_a_newer_build": {"x": 1}, "include_archived": True})
    assert loaded.settings.include_archived is True and loaded.problems == ()


@pytest.mark.req("settings:strict")
def test_unreadable_files_are_discarded_layers_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / settings.WORKSPACE_FILE).write_text("{not json")
    instance = tmp_path / "engine.toml"
    instance.write_text("half_life_days = 45\nfacts_share = 0.75\n")
    loaded = settings.load(instance, tmp_path / "ws")
    assert loaded.settings.half_life_days == 45.0 and loaded.settings.facts_share == 0.75
    assert loaded.origin["half_life_days"] == "instance"
    assert len(loaded.problems) == 1 and "not valid JSON" in loaded.problems[0]
    missing = settings.load(tmp_path / "nope.json", tmp_path / "empty")
    assert missing.settings == settings.EngineSettings()
    assert "does not exist" in missing.problems[0]
    listing = settings.load(None, tmp_path / "ws2")  # no workspace file: simply no layer
    assert listing.problems == () and set(listing.origin.values()) == {"default"}


@pytest.mark.req("settings:layers")
def test_command_line_overrides_sit_on_top(tmp_path: Path) -> None:
    (tmp_path / settings.WORKSPACE_FILE).write_text(json.dumps({"embedding_provider": "vertex"}))
    loaded = settings.load(None, tmp_path, {"embedding_provider": "off"})
    assert loaded.settings.embedding_provider == "off"
    assert loaded.origin["embedding_provider"] == "command line"


@pytest.mark.req("settings:layers")
def test_the_settings_reach_recall_and_choose_the_provider() -> None:
    s = settings.resolve({"max_tokens_default": 1200, "facts_share": 0.3, "notes_limit": 5}, None).settings
    rs = recall_settings(s)
    assert (rs.max_tokens_default, rs.facts_share, rs.notes_limit) == (1200, 0.3, 5)
    assert (
        embedder_for(settings.resolve(None, {"embedding_provider": "off"}).settings, "/x.sock").provider
        == "off"
    )
    assert embedder_for(s, "/run/embedder.sock").provider == "remote"
    layer = {"embedding_provider": "vertex", "vertex_project": "p1", "vertex_base_url": "http://h"}
    vertex = settings.resolve(layer, None)
    built = embedder_for(vertex.settings, "/run/embedder.sock")
    assert built.provider == "vertex" and built.model_id.startswith("vertex:")


@pytest.mark.req("settings:strict")
def test_the_engine_logs_a_discarded_layer_and_status_shows_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from engine.server import main

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / settings.WORKSPACE_FILE).write_text(json.dumps({"half_life_days": -1}))
    with caplog.at_level(logging.WARNING, logger="almanac.engine"):
        assert main(["--reindex", "--create", "--dir", str(ws), "--embedding-provider", "off"]) == 0
    assert any("workspace settings were ignored" in r.getMessage() for r in caplog.records)


@pytest.mark.req("sec:authz")
@pytest.mark.parametrize("name", sorted(settings.INSTANCE_ONLY))
def test_a_workspace_layer_cannot_name_where_memories_are_sent(name: str) -> None:
    value: object = True if name == "vertex_offered" else "http://127.0.0.1:9/steal"
    loaded = settings.resolve({"vertex_location": "europe-west4"}, {name: value, "half_life_days": 90})
    assert getattr(loaded.settings, name) == getattr(
        settings.resolve({"vertex_location": "europe-west4"}, None).settings, name
    )
    assert loaded.settings.half_life_days == 90.0  # the rest of the layer still works
    assert loaded.origin[name] != "workspace"
    assert loaded.problems == (f"a workspace setting was ignored: {settings.operator_only(name)}",)


@pytest.mark.req("sec:authz")
def test_a_workspace_chooses_vertex_only_when_the_operator_offers_it() -> None:
    asked = {"embedding_provider": "vertex"}
    refused = settings.resolve(None, asked)
    assert refused.settings.embedding_provider == "local"
    assert refused.problems == (
        "a workspace setting was ignored: embedding_provider 'vertex' is not offered on this host: "
        "the operator has not set it up; choose one of local, off",
    )
    for operator in ({"vertex_offered": True}, {"embedding_provider": "vertex"}):
        loaded = settings.resolve(operator, asked)
        assert loaded.settings.embedding_provider == "vertex" and loaded.problems == ()
    assert settings.resolve(None, {"embedding_provider": "off"}).settings.embedding_provider == "off"
    offered_on_command_line = settings.resolve(None, asked, overrides={"vertex_offered": True})
    assert offered_on_command_line.settings.embedding_provider == "vertex"


@pytest.mark.req("sec:authz")
def test_an_engine_never_embeds_with_an_endpoint_its_workspace_names(tmp_path: Path) -> None:
    from engine.server import embedder_for as build

    ws = tmp_path / "ws"
    ws.mkdir()
    hostile = {"embedding_provider": "vertex", "vertex_base_url": "http://127.0.0.1:9/", "notes_limit": 3}
    (ws / settings.WORKSPACE_FILE).write_text(json.dumps(hostile))
    loaded = settings.load(None, ws)
    assert (loaded.settings.embedding_provider, loaded.settings.vertex_base_url) == ("local", None)
    assert loaded.settings.notes_limit == 3 and len(loaded.problems) == 2
    assert build(loaded.settings, "/run/embedder.sock").provider == "remote"
    assert settings.report(loaded)["problems"] == list(loaded.problems)  # memory_status shows why
