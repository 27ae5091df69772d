"""Settings as the seed names them: off by default, autoLoad/autoSave on under the switch."""

from __future__ import annotations

from typing import Any

import pytest

from almanac.host import HostSettings, HostSettingsError

pytestmark = pytest.mark.req("host:turn-loop")


def test_defaults() -> None:
    s = HostSettings()
    assert (s.enabled, s.auto_load, s.auto_save) == (False, True, True)
    assert (s.max_item_chars, s.max_block_chars) == (1_000, 8_000)
    assert not s.loads and not s.saves
    on = HostSettings(enabled=True)
    assert on.loads and on.saves


def test_from_the_seeds_spelling_unknown_keys_ignored() -> None:
    s = HostSettings.from_mapping({"enabled": True, "autoLoad": False, "autoSave": True, "topK": 7, "x": 1})
    assert s.enabled and not s.loads and s.saves and s.top_k == 7


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"enabled": "yes"}, "enabled"),
        ({"autoSave": 1}, "auto_save"),
        ({"max_block_chars": 100}, "max_block_chars"),
        ({"max_item_chars": 10.5}, "max_item_chars"),
        ({"load_timeout": "3"}, "load_timeout"),
        ({"load_timeout": 21}, "load_timeout"),  # no single operation may take over 20 s
        ({"topK": 0}, "top_k"),
        ({"decayHalfLifeDays": 4_000}, "decay_half_life_days"),
        ({"provider": "headroom"}, "provider"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(HostSettingsError, match=field):
        HostSettings.from_mapping(raw)
