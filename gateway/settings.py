"""The gateway's one frozen settings object, and how it is built (``run:config``).

Sources, lowest first: built-in defaults, a TOML config file, ``ALMANAC_``-prefixed environment
variables, then explicit overrides (CLI flags). :func:`load_settings` is pure over the mappings it is
given; only the composition root (``gateway.cli``) hands it ``os.environ`` and reads the file, once.
Every field is documented in ``docs/configuration.md`` (a test keeps the two in step).
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from gateway.control.nodes import node_name_problem
from gateway.errors import ConfigError

ENV_PREFIX = "ALMANAC_"
CONFIG_ENV = "ALMANAC_CONFIG"
DEFAULT_CONFIG_NAME = "almanac.toml"
DATA_DIR_NAME = "almanac"
#: The shortest cluster_secret accepted (characters).
MIN_SECRET_LENGTH = 32


def default_data_dir(env: Mapping[str, str]) -> Path:
    """The per-user data directory: ``$XDG_DATA_HOME/almanac``, else ``~/.local/share/almanac``.

    Never the current directory: every command finds the same data wherever it is run from."""
    xdg = env.get("XDG_DATA_HOME", "").strip()
    if xdg and Path(xdg).expanduser().is_absolute():  # the XDG spec says: ignore a relative value
        return Path(xdg).expanduser() / DATA_DIR_NAME
    home = env.get("HOME", "").strip()
    return (Path(home) if home else Path.home()) / ".local" / "share" / DATA_DIR_NAME


@dataclass(frozen=True)
class Settings:
    # where things live
    data_dir: Path = field(default_factory=lambda: default_data_dir({}))
    runtime_dir: Path | None = None
    database_url: str | None = None  # postgresql://… — the control plane in PostgreSQL, not data_dir
    # one node of several: its name and the URL the other nodes reach it at
    node: str | None = None
    advertise_url: str | None = None
    node_heartbeat_interval: float = field(default=5.0, metadata={"min": 0.05})
    placement_lease: float = field(default=30.0, metadata={"min": 0.1})
    move_timeout: float = field(
        default=60.0, metadata={"min": 0.5}
    )  # a move not advanced this long is called off
    cluster_secret: str | None = None  # signs calls between nodes; the same on every node
    forward_timeout: float = field(default=60.0, metadata={"min": 1.0})  # a forwarded call's every wait
    # the HTTP server
    host: str = "127.0.0.1"
    port: int = field(default=8080, metadata={"min": 0, "max": 65535})
    public_url: str | None = None
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = field(default=4 * 1024 * 1024, metadata={"min": 1024})
    import_max_bytes: int = field(default=64 * 1024 * 1024, metadata={"min": 1024})
    import_max_unpacked_bytes: int = field(default=256 * 1024 * 1024, metadata={"min": 1024})
    rate_limit_per_second: float = field(default=20.0, metadata={"min": 0.01})
    rate_limit_burst: int = field(default=60, metadata={"min": 1})
    trusted_proxies: tuple[str, ...] = ()  # addresses/networks whose X-Forwarded-For is believed
    register_rate_limit: int = field(default=10, metadata={"min": 1})  # per address, a minute
    token_rate_limit: int = field(default=60, metadata={"min": 1})
    signin_rate_limit: int = field(default=20, metadata={"min": 1})
    authorize_rate_limit: int = field(default=60, metadata={"min": 1})
    # engines
    engine_command: tuple[str, ...] = ()
    engine_settings_file: Path | None = None
    engine_idle_timeout: float = field(default=600.0, metadata={"min": 0.05})
    engine_start_timeout: float = field(default=10.0, metadata={"min": 0.0})
    engine_start_kill_timeout: float = field(default=300.0, metadata={"min": 1.0})
    engine_start_concurrency: int | None = field(default=None, metadata={"min": 1})  # None: one per core
    engine_stop_timeout: float = field(default=10.0, metadata={"min": 0.1})
    engine_max_connections: int = field(default=100, metadata={"min": 1})
    engine_warm_spare: bool = True
    engine_fork_server: bool = True  # with engine_warm_spare: fork engines from it (Linux)
    max_engines: int = field(default=50, metadata={"min": 1})
    restart_backoff_initial: float = field(default=0.5, metadata={"min": 0.0})
    restart_backoff_max: float = field(default=30.0, metadata={"min": 0.0})
    crash_loop_threshold: int = field(default=5, metadata={"min": 1})
    crash_loop_window: float = field(default=60.0, metadata={"min": 1.0})
    retry_after: float = field(default=5.0, metadata={"min": 1.0})
    # the shared embedder service
    embedder: bool = True
    embedder_command: tuple[str, ...] = ()
    embedder_start_timeout: float = field(default=60.0, metadata={"min": 0.1})
    # owner accounts and the web pages
    signup: str = field(default="open", metadata={"choices": ("open", "invite", "closed")})
    cookie_secure: bool | None = None
    session_max_age: float = field(default=14 * 24 * 3600.0, metadata={"min": 60.0})
    login_max_failures: int = field(default=5, metadata={"min": 1})
    login_max_failures_per_address: int = field(default=20, metadata={"min": 1})
    login_max_failures_per_account: int = field(default=100, metadata={"min": 1})
    login_throttle_window: float = field(default=900.0, metadata={"min": 1.0})
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    oidc_name: str = "single sign-on"
    # the OAuth authorization server
    oauth_access_token_ttl: float = field(default=3600.0, metadata={"min": 60.0})
    oauth_refresh_token_ttl: float = field(default=30 * 86400.0, metadata={"min": 3600.0})
    oauth_code_ttl: float = field(default=120.0, metadata={"min": 10.0, "max": 600.0})
    oauth_unused_client_ttl: float = field(default=86400.0, metadata={"min": 60.0})
    oauth_max_unused_clients: int = field(default=10_000, metadata={"min": 10})
    oauth_cimd_timeout: float = field(default=5.0, metadata={"min": 0.1, "max": 30.0})
    oauth_cimd_max_bytes: int = field(default=65536, metadata={"min": 1024})
    oauth_cimd_allow_private: bool = False
    # logs
    log_level: str = field(default="info", metadata={"choices": ("debug", "info", "warning", "error")})
    log_format: str = field(default="auto", metadata={"choices": ("auto", "json", "text")})

    def __post_init__(self) -> None:
        if self.public_url is not None and not self.public_url.startswith(("http://", "https://")):
            raise ConfigError(f"public_url must start with http:// or https://, got {self.public_url!r}")
        if self.database_url is not None and not self.database_url.startswith(
            ("postgresql://", "postgres://")
        ):
            raise ConfigError(
                "database_url must be a PostgreSQL URL (postgresql://USER:PASSWORD@HOST:PORT/DATABASE); "
                "leave it unset to keep the control plane in <data_dir>/control.db"
            )
        self._check_node()
        oidc = (self.oidc_issuer, self.oidc_client_id, self.oidc_client_secret)
        if any(oidc) and not all(oidc):
            raise ConfigError(
                "OpenID Connect sign-in needs all of oidc_issuer, oidc_client_id and oidc_client_secret"
            )
        if self.oidc_issuer is not None and not self.oidc_issuer.startswith(("http://", "https://")):
            raise ConfigError(f"oidc_issuer must start with https:// (or http://), got {self.oidc_issuer!r}")
        if self.engine_start_kill_timeout <= self.engine_start_timeout:
            raise ConfigError(
                "engine_start_kill_timeout must be longer than engine_start_timeout "
                "(a caller's wait ends before a slow start is given up)"
            )
        if self.restart_backoff_max < self.restart_backoff_initial:
            raise ConfigError("restart_backoff_max must be at least restart_backoff_initial")

    def _check_node(self) -> None:
        if self.node is None:
            if self.advertise_url is not None:
                raise ConfigError("advertise_url is for a node: set node (--node NAME) too")
            return
        problem = node_name_problem(self.node)
        if problem is not None:
            raise ConfigError(f"setting node: {problem}")
        if self.advertise_url is None or not self.advertise_url.startswith(("http://", "https://")):
            raise ConfigError(
                "a node needs advertise_url (--advertise URL): the http(s) URL other nodes reach it at"
            )
        if self.database_url is None:
            raise ConfigError(
                "a node shares the control plane with the other nodes: set database_url "
                "(ALMANAC_DATABASE_URL=postgresql://…) too"
            )
        if self.cluster_secret is None or len(self.cluster_secret) < MIN_SECRET_LENGTH:
            raise ConfigError(
                f"a node needs cluster_secret (ALMANAC_CLUSTER_SECRET), at least {MIN_SECRET_LENGTH} "
                "characters and the same on every node, to sign the calls it forwards "
                "(e.g. `openssl rand -hex 32`)"
            )
        if self.placement_lease <= self.node_heartbeat_interval:
            raise ConfigError("placement_lease must be longer than node_heartbeat_interval")


def setting_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(Settings))


_HINTS: dict[str, Any] = get_type_hints(Settings)


def _base_type(hint: Any) -> tuple[Any, bool]:
    """(the non-None type, whether None is allowed) for a field's annotation."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _coerce(name: str, raw: object) -> object:
    """Turn a raw value (a string from the environment, or a TOML value) into the field's type."""
    hint, nullable = _base_type(_HINTS[name])
    if nullable and (raw is None or raw == ""):
        return None
    try:
        if hint is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"expected true or false, got {raw!r}")
        if hint is int:
            if isinstance(raw, (bool, float)):
                raise ValueError(f"expected a whole number, got {raw!r}")
            return int(str(raw).strip())
        if hint is float:
            if isinstance(raw, bool):
                raise ValueError(f"expected a number, got {raw!r}")
            return float(str(raw).strip()) if isinstance(raw, str) else float(raw)  # type: ignore[arg-type]
        if hint is Path:
            return Path(str(raw)).expanduser()  # `~` from a file or a JSON client config (no shell)
        if get_origin(hint) is tuple:
            if isinstance(raw, str):
                return tuple(part.strip() for part in raw.split(",") if part.strip())
            if isinstance(raw, list | tuple):
                return tuple(str(part) for part in raw)
            raise ValueError(f"expected a list, got {raw!r}")
        if hint is str:
            if not isinstance(raw, str):
                raise ValueError(f"expected text, got {raw!r}")
            return raw
    except ValueError as exc:
        raise ConfigError(f"setting {name}: {exc}") from exc
    raise ConfigError(f"setting {name}: unsupported type {hint!r}")  # pragma: no cover


def _check(name: str, value: object) -> None:
    meta = next(f.metadata for f in dataclasses.fields(Settings) if f.name == name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "min" in meta and value < meta["min"]:
            raise ConfigError(f"setting {name}: {value} is below the minimum {meta['min']}")
        if "max" in meta and value > meta["max"]:
            raise ConfigError(f"setting {name}: {value} is above the maximum {meta['max']}")
    if "choices" in meta and value not in meta["choices"]:
        raise ConfigError(f"setting {name}: {value!r} is not one of {', '.join(meta['choices'])}")


def parse_toml(text: str, *, source: str) -> dict[str, object]:
    """A config file's settings; unknown keys are refused (they are almost always typos)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    section = data.get("almanac", data)
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: [almanac] must be a table")
    unknown = sorted(set(section) - set(setting_names()))
    if unknown:
        raise ConfigError(f"{source}: unknown settings {', '.join(unknown)}; see docs/configuration.md")
    return dict(section)


def from_env(env: Mapping[str, str]) -> dict[str, str]:
    """The settings named by ``ALMANAC_<NAME>`` variables (other ``ALMANAC_`` variables are ignored)."""
    names = set(setting_names())
    found: dict[str, str] = {}
    for key, value in env.items():
        if key.startswith(ENV_PREFIX):
            name = key[len(ENV_PREFIX) :].lower()
            if name in names:
                found[name] = value
    return found


def load_settings(
    *,
    file_values: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Layer defaults < file < environment < overrides into one validated :class:`Settings`."""
    merged: dict[str, object] = {}
    for layer in (file_values or {}, from_env(env or {})):
        for name, raw in layer.items():
            merged[name] = _coerce(name, raw)
    for name, value in (overrides or {}).items():
        if value is not None:
            merged[name] = _coerce(name, value) if isinstance(value, str | Path) else value
    merged.setdefault("data_dir", default_data_dir(env or {}))
    for name, value in merged.items():
        _check(name, value)
    return Settings(**merged)  # type: ignore[arg-type]


def config_file_path(explicit: Path | None, env: Mapping[str, str], data_dir: Path | None) -> Path | None:
    """Which config file to read: ``--config``, else ``$ALMANAC_CONFIG``, else ``<data_dir>/almanac.toml``
    when it exists. An explicitly named file must exist."""
    if explicit is not None:
        return explicit
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    if data_dir is not None and (data_dir / DEFAULT_CONFIG_NAME).is_file():
        return data_dir / DEFAULT_CONFIG_NAME
    return None
