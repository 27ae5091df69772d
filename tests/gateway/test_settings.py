"""Settings: defaults < file < environment < flags, validated, every one documented (run:config)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.settings import (
    Settings,
    config_file_path,
    default_data_dir,
    from_env,
    load_settings,
    parse_toml,
    setting_names,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.req("run:config")
def test_defaults() -> None:
    s = load_settings(env={"HOME": "/home/ada"})
    assert s == Settings(data_dir=Path("/home/ada/.local/share/almanac"))
    assert (s.host, s.port, s.engine_idle_timeout, s.embedder, s.log_format) == (
        "127.0.0.1",
        8080,
        600.0,
        True,
        "auto",
    )


@pytest.mark.req("run:config")
def test_the_default_data_dir_is_per_user() -> None:
    assert default_data_dir({"HOME": "/home/ada"}) == Path("/home/ada/.local/share/almanac")
    assert default_data_dir({"HOME": "/home/ada", "XDG_DATA_HOME": "/xdg"}) == Path("/xdg/almanac")
    assert default_data_dir({"HOME": "/home/ada", "XDG_DATA_HOME": "rel"}) == Path(
        "/home/ada/.local/share/almanac"
    )


@pytest.mark.req("run:config")
def test_layers_in_order() -> None:
    file_values = parse_toml(
        'port = 9000\nmax_engines = 3\nallowed_origins = ["https://a.example"]', source="f"
    )
    env = {"ALMANAC_PORT": "9100", "ALMANAC_EMBEDDER": "off", "ALMANAC_UNRELATED": "x", "HOME": "/"}
    s = load_settings(file_values=file_values, env=env, overrides={"port": 0, "host": None})
    assert s.port == 0  # flag beats environment beats file
    assert s.max_engines == 3
    assert s.embedder is False
    assert s.allowed_origins == ("https://a.example",)
    assert s.host == "127.0.0.1"  # a flag left unset does not override


@pytest.mark.req("run:config")
def test_env_lists_and_paths() -> None:
    s = load_settings(env={"ALMANAC_ALLOWED_HOSTS": "a.example, b.example", "ALMANAC_DATA_DIR": "/srv/x"})
    assert s.allowed_hosts == ("a.example", "b.example")
    assert s.data_dir == Path("/srv/x")
    assert from_env({"ALMANAC_CONFIG": "x.toml"}) == {}


PG = "postgresql://almanac@db.internal/almanac"


@pytest.mark.req("run:config")
@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"ALMANAC_PORT": "eighty"}, "port"),
        ({"ALMANAC_PORT": "70000"}, "above the maximum"),
        ({"ALMANAC_ENGINE_IDLE_TIMEOUT": "0"}, "below the minimum"),
        ({"ALMANAC_LOG_LEVEL": "loud"}, "not one of"),
        ({"ALMANAC_EMBEDDER": "maybe"}, "true or false"),
        ({"ALMANAC_PUBLIC_URL": "mem.example.com"}, "public_url"),
        ({"ALMANAC_DATABASE_URL": "sqlite:///x.db"}, "database_url must be a PostgreSQL URL"),
        ({"ALMANAC_NODE": "node-a", "ALMANAC_ADVERTISE_URL": "http://a"}, "set database_url"),
        ({"ALMANAC_NODE": "node-a", "ALMANAC_DATABASE_URL": PG}, "needs advertise_url"),
        (
            {"ALMANAC_NODE": "node-a", "ALMANAC_DATABASE_URL": PG, "ALMANAC_ADVERTISE_URL": "a:80"},
            "advertise_url",
        ),
        (
            {"ALMANAC_NODE": "Node_A", "ALMANAC_DATABASE_URL": PG, "ALMANAC_ADVERTISE_URL": "http://a"},
            "node name",
        ),
        ({"ALMANAC_ADVERTISE_URL": "http://a"}, "set node"),
        (
            {"ALMANAC_NODE": "node-a", "ALMANAC_DATABASE_URL": PG, "ALMANAC_ADVERTISE_URL": "http://a"},
            "a node needs cluster_secret",
        ),
        (
            {
                "ALMANAC_NODE": "node-a",
                "ALMANAC_DATABASE_URL": PG,
                "ALMANAC_ADVERTISE_URL": "http://a",
                "ALMANAC_CLUSTER_SECRET": "k" * 31,
            },
            "at least 32 characters",
        ),
        (
            {
                "ALMANAC_NODE": "node-a",
                "ALMANAC_DATABASE_URL": PG,
                "ALMANAC_ADVERTISE_URL": "http://a",
                "ALMANAC_CLUSTER_SECRET": "k" * 32,
                "ALMANAC_PLACEMENT_LEASE": "1",
                "ALMANAC_NODE_HEARTBEAT_INTERVAL": "2",
            },
            "placement_lease must be longer",
        ),
        ({"ALMANAC_ENGINE_START_KILL_TIMEOUT": "10"}, "engine_start_kill_timeout must be longer"),
        ({"ALMANAC_ENGINE_START_CONCURRENCY": "0"}, "engine_start_concurrency: 0 is below the minimum 1"),
    ],
)
def test_bad_values_are_refused_with_the_setting_named(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_settings(env=env)


@pytest.mark.req("run:config")
def test_config_file_refuses_unknown_keys_and_bad_toml() -> None:
    with pytest.raises(ConfigError, match="unknown settings prot"):
        parse_toml("prot = 1", source="f")
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_toml("port = = 1", source="f")
    assert parse_toml("[almanac]\nport = 1", source="f") == {"port": 1}


@pytest.mark.req("run:config")
def test_which_config_file(tmp_path: Path) -> None:
    assert config_file_path(None, {}, tmp_path) is None
    (tmp_path / "almanac.toml").write_text("", encoding="utf-8")
    assert config_file_path(None, {}, tmp_path) == tmp_path / "almanac.toml"
    assert config_file_path(None, {"ALMANAC_CONFIG": "/etc/a.toml"}, tmp_path) == Path("/etc/a.toml")
    assert config_file_path(Path("x.toml"), {"ALMANAC_CONFIG": "/etc/a.toml"}, tmp_path) == Path("x.toml")


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Settings().port = 1  # type: ignore[misc]


@pytest.mark.req("run:config")
def test_every_setting_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `([a-z_]+)`$", text, flags=re.MULTILINE))
    assert set(setting_names()) - headings == set(), "settings missing from docs/configuration.md"
    assert headings - set(setting_names()) == set(), "docs/configuration.md documents unknown settings"
