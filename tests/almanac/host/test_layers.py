"""Memory settings as two layers over the defaults (settings:layers, settings:strict)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from almanac.host import HostSettings, LayerError, clear_override, load_settings
from almanac.host.layers import merge

LAYERS = pytest.mark.req("settings:layers")
STRICT = pytest.mark.req("settings:strict")


def instance(tmp: Path, memory: dict[str, Any], name: str = "app.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps({"theme": "dark", "memory": memory}), encoding="utf-8")
    return path


def workspace(tmp: Path, memory: dict[str, Any], name: str = "config.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps({"defaults": {"memory": memory, "model": "m"}}), encoding="utf-8")
    return path


@LAYERS
def test_the_documented_defaults() -> None:
    s = HostSettings()
    assert (s.enabled, s.provider, s.top_k, s.auto_load, s.auto_save) == (False, "almanac", 5, True, True)
    assert (s.decay_half_life_days, s.include_archived) == (60, False)


@LAYERS
def test_a_workspace_value_wins_field_by_field_and_each_value_says_where_it_came_from(
    tmp_path: Path,
) -> None:
    layered = load_settings(
        instance(tmp_path, {"enabled": True, "topK": 8, "decayHalfLifeDays": 30}),
        workspace(tmp_path, {"topK": 3, "includeArchived": True}),
    )
    s = layered.settings
    assert (s.enabled, s.top_k, s.decay_half_life_days, s.include_archived, s.auto_save) == (
        True,
        3,
        30,
        True,
        True,
    )
    assert layered.origin_of("topK") == "Workspace override"
    assert layered.origin_of("include_archived") == "Workspace override"
    assert layered.origin_of("enabled") == "Instance default"
    assert layered.origin_of("decayHalfLifeDays") == "Instance default"
    assert layered.origin_of("autoSave") == "Default"
    assert ("topK", 3, "Workspace override") in layered.rows()
    assert layered.warnings == ()


@LAYERS
def test_toml_files_are_read_by_their_suffix(tmp_path: Path) -> None:
    app = tmp_path / "app.toml"
    app.write_text("[memory]\nenabled = true\nprovider = 'mcp'\n", encoding="utf-8")
    ws = tmp_path / "config.toml"
    ws.write_text("[defaults.memory]\ntopK = 12\n", encoding="utf-8")
    layered = load_settings(app, ws)
    assert (layered.settings.enabled, layered.settings.provider, layered.settings.top_k) == (True, "mcp", 12)
    assert layered.origin_of("provider") == "Instance default"


@LAYERS
def test_no_file_or_no_section_is_no_layer_and_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "app.json").write_text('{"theme": "dark"}', encoding="utf-8")
    layered = load_settings(tmp_path / "app.json", tmp_path / "missing.json")
    assert layered.settings == HostSettings() and layered.warnings == () and caplog.records == []


@STRICT
@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"topK": 0}, "topK"),
        ({"topK": 51}, "topK"),
        ({"topK": 2.5}, "topK"),
        ({"decayHalfLifeDays": 0.5}, "decayHalfLifeDays"),
        ({"decayHalfLifeDays": 3_651}, "decayHalfLifeDays"),
        ({"includeArchived": "yes"}, "includeArchived"),
        ({"enabled": 1}, "enabled"),
        ({"provider": "builtin-markdown"}, "provider"),
        ({"autoLoad": None}, "autoLoad"),
    ],
)
def test_a_bad_workspace_layer_is_discarded_whole_and_the_instance_layer_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: dict[str, Any], field: str
) -> None:
    ws = workspace(tmp_path, {"topK": 9, "includeArchived": True, **bad})
    layered = load_settings(instance(tmp_path, {"enabled": True, "topK": 7}), ws)
    assert layered.settings.top_k == 7  # not 9: the good values of a bad layer are not used either
    assert layered.settings.include_archived is False and layered.settings.enabled is True
    assert layered.origin_of("topK") == "Instance default"
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert str(ws) in warning and f"defaults.memory.{field}" in warning and "whole layer" in warning


@STRICT
def test_a_bad_instance_layer_falls_through_to_the_defaults_that_is_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = instance(tmp_path, {"enabled": True, "topK": 500})
    layered = load_settings(app, None)
    assert layered.settings == HostSettings() and not layered.settings.enabled
    assert layered.origin_of("enabled") == "Default"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert str(app) in warning and "memory.topK" in warning and "50" in warning


@STRICT
def test_a_bad_instance_layer_leaves_a_good_workspace_layer_working(tmp_path: Path) -> None:
    layered = load_settings(
        instance(tmp_path, {"enabled": "on"}), workspace(tmp_path, {"enabled": True, "topK": 2})
    )
    assert layered.settings.enabled and layered.settings.top_k == 2
    assert layered.origin_of("enabled") == "Workspace override" and len(layered.warnings) == 1


@STRICT
@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must hold an object"),
        ('{"defaults": {"memory": 3}}', "object"),
    ],
)
def test_an_unreadable_layer_is_discarded_with_one_warning_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, why: str
) -> None:
    ws = tmp_path / "config.json"
    ws.write_text(text, encoding="utf-8")
    layered = load_settings(instance(tmp_path, {"enabled": True}), ws)
    assert layered.settings.enabled  # the instance layer below still answers
    (warning,) = [r.getMessage() for r in caplog.records]
    assert str(ws) in warning and why in warning


@STRICT
def test_an_unknown_key_is_ignored_and_the_layer_still_works(tmp_path: Path) -> None:
    layered = load_settings(
        None, workspace(tmp_path, {"enabled": True, "topK": 4, "rerankWithLLM": "always", "v": [1]})
    )
    assert layered.settings.enabled and layered.settings.top_k == 4 and layered.warnings == ()


@LAYERS
def test_clearing_an_override_reverts_the_field_to_the_instance_default_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    app = instance(tmp_path, {"enabled": True, "topK": 8})
    ws = workspace(tmp_path, {"topK": 3, "autoSave": False})
    assert load_settings(app, ws).origin_of("topK") == "Workspace override"
    assert clear_override(ws, "topK") is True
    layered = load_settings(app, ws)
    assert layered.settings.top_k == 8 and layered.origin_of("topK") == "Instance default"
    assert layered.settings.auto_save is False and layered.origin_of("autoSave") == "Workspace override"
    assert json.loads(ws.read_text(encoding="utf-8"))["defaults"]["model"] == "m"  # the rest is kept
    assert clear_override(ws, "top_k") is False  # nothing left to clear
    with pytest.raises(KeyError, match="no memory setting"):
        clear_override(ws, "topk")


@LAYERS
def test_clearing_refuses_a_toml_workspace_file_and_changes_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "config.toml"
    ws.write_text("[defaults.memory]\ntopK = 12\n", encoding="utf-8")
    with pytest.raises(LayerError, match="JSON"):
        clear_override(ws, "topK")
    assert ws.read_text(encoding="utf-8") == "[defaults.memory]\ntopK = 12\n"


@LAYERS
def test_two_workspaces_hold_independent_settings_over_one_instance_layer(tmp_path: Path) -> None:
    app = instance(tmp_path, {"enabled": True})
    one = workspace(tmp_path, {"topK": 2}, "one.json")
    two = workspace(tmp_path, {"includeArchived": True}, "two.json")
    a, b = load_settings(app, one), load_settings(app, two)
    assert (a.settings.top_k, a.settings.include_archived) == (2, False)
    assert (b.settings.top_k, b.settings.include_archived) == (5, True)
    clear_override(one, "topK")
    assert load_settings(app, two).settings.include_archived is True


@LAYERS
def test_settings_are_read_once_a_change_applies_to_the_next_session(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"enabled": True, "topK": 2})
    session = load_settings(None, ws).settings
    workspace(tmp_path, {"enabled": True, "topK": 9})
    assert session.top_k == 2  # a frozen value: nothing re-reads the file under a running session
    assert load_settings(None, ws).settings.top_k == 9


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "enabled": st.booleans(),
    "topK": st.integers(1, 50),
    "autoSave": st.booleans(),
    "decayHalfLifeDays": st.integers(1, 3650),
    "includeArchived": st.booleans(),
    "provider": st.sampled_from(["almanac", "mcp"]),
}
NAMES = {"topK": "top_k", "autoSave": "auto_save", "decayHalfLifeDays": "decay_half_life_days"}
NAMES |= {"includeArchived": "include_archived", "enabled": "enabled", "provider": "provider"}
layer = st.fixed_dictionaries({}, optional=VALUES)


@LAYERS
@given(layer, layer)
def test_each_field_is_the_workspace_value_else_the_instance_value_else_the_default(
    inst: dict[str, Any], ws: dict[str, Any]
) -> None:
    layered = merge(inst, ws)
    for key, name in NAMES.items():
        value, origin = getattr(layered.settings, name), layered.origin[name]
        if key in ws:
            assert (value, origin) == (ws[key], "Workspace override")
        elif key in inst:
            assert (value, origin) == (inst[key], "Instance default")
        else:
            assert (value, origin) == (getattr(HostSettings(), name), "Default")
