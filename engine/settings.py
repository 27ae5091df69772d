"""The engine's settings (``settings:layers``, ``settings:strict``): one frozen value, read once at start.

Two layers over the built-in defaults, lowest first:

- the **instance** layer: the operator's file, given as ``--settings FILE`` (the gateway passes its
  ``engine_settings_file`` to every engine it starts);
- the **workspace** layer: ``settings.json`` in the workspace directory.

A workspace value wins over the instance value field by field; what neither sets is the default.
Where memories are *sent* is the operator's alone (``sec:authz``): the fields in
:data:`INSTANCE_ONLY` (a provider's project, region, endpoint, and whether workspaces may use Vertex
AI at all) are taken only from the instance layer or the command line, and a workspace layer may
choose only among :func:`offered_providers`. A workspace value that oversteps is ignored, that key
alone, with a reason in ``problems``.
A layer holding a bad value (wrong type, unknown enum value, number out of range) is discarded
*whole*, with a logged reason, and the layer below is used; an unknown key is ignored and the layer
still works (a key written by a newer build must not disable an older one). Each field remembers
where its value came from, for ``memory_status`` and the dashboard's badges.

:func:`resolve` is pure over the two mappings; :func:`read_layer` and :func:`scrub_restored` are the
only I/O here.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.store import fsio

Origin = Literal["default", "instance", "workspace", "command line"]
WORKSPACE_FILE = "settings.json"
PROVIDERS = ("local", "vertex", "off")


@dataclass(frozen=True)
class EngineSettings:
    """Every setting an engine reads. ``metadata``: ``min``/``max`` for numbers, ``choices`` for enums."""

    # ageing (life:decay, life:archive)
    half_life_days: float = field(default=60.0, metadata={"min": 1, "max": 3650})
    include_archived: bool = False
    # get_context
    max_tokens_default: int = field(default=800, metadata={"min": 100, "max": 4000})
    facts_share: float = field(default=0.5, metadata={"min": 0.0, "max": 1.0})
    min_match_score: float = field(default=0.5, metadata={"min": 0.0, "max": 1.0})
    match_floor: float = field(default=0.2, metadata={"min": 0.0, "max": 1.0})
    notes_limit: int = field(default=20, metadata={"min": 1, "max": 50})
    facts_limit: int = field(default=12, metadata={"min": 1, "max": 50})
    # embeddings (SPEC §8)
    embedding_provider: str = field(default="local", metadata={"choices": PROVIDERS})
    vertex_project: str | None = None
    vertex_location: str = "us-central1"
    vertex_base_url: str | None = None
    vertex_batch_size: int = field(default=32, metadata={"min": 1, "max": 250})
    vertex_offered: bool = False  # the operator lets workspaces choose vertex
    # the retrieval log (life:retrieval-log)
    log_queries: bool = False
    retrieval_log_max_bytes: int = field(default=1_048_576, metadata={"min": 4096, "max": 1 << 30})


FIELDS: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(EngineSettings)
NAMES = tuple(f.name for f in FIELDS)
#: Settings only the operator sets (instance file or command line): they decide where memory text
#: and the host's credentials go, so a workspace — a tenant — may never name them (``sec:authz``).
INSTANCE_ONLY = frozenset({"vertex_project", "vertex_location", "vertex_base_url", "vertex_offered"})


def offered_providers(instance: EngineSettings) -> tuple[str, ...]:
    """The providers a workspace may choose, given the operator's settings: ``local`` and ``off``
    always; ``vertex`` when the operator set it up (chose it, or set ``vertex_offered``)."""
    if instance.embedding_provider == "vertex" or instance.vertex_offered:
        return PROVIDERS
    return tuple(p for p in PROVIDERS if p != "vertex")


def operator_only(name: str) -> str:
    """Why a workspace may not set ``name`` (one of :data:`INSTANCE_ONLY`)."""
    return (
        f"{name} is the operator's to set (the engines' instance settings file), not a workspace's: "
        "it decides where memories are sent"
    )


def not_offered(provider: str, offered: tuple[str, ...]) -> str:
    return (
        f"embedding_provider {provider!r} is not offered on this host: the operator has not set it up; "
        f"choose one of {', '.join(offered)}"
    )


class LayerError(ValueError):
    """Why a layer was discarded (the message names the file's field and what to fix)."""


@dataclass(frozen=True)
class Loaded:
    settings: EngineSettings
    origin: Mapping[str, Origin]
    problems: tuple[str, ...] = ()  # one line per discarded layer or ignored workspace value


def _check(f: dataclasses.Field[Any], value: object) -> object:
    """The value as the field's type, or raise :class:`LayerError` saying what is wrong."""
    hint = str(f.type)
    name = f.name
    if value is None and "None" in hint:
        return None
    if hint.startswith("bool"):
        if not isinstance(value, bool):
            raise LayerError(f"{name} must be true or false, not {value!r}")
        return value
    if hint.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise LayerError(f"{name} must be a whole number, not {value!r}")
        out: object = value
    elif hint.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise LayerError(f"{name} must be a number, not {value!r}")
        out = float(value)
    else:
        if not isinstance(value, str) or not value.strip():
            raise LayerError(f"{name} must be a non-empty string, not {value!r}")
        out = value.strip()
    meta = f.metadata
    low, high = meta.get("min"), meta.get("max")
    if isinstance(out, int | float) and low is not None and high is not None and not low <= out <= high:
        raise LayerError(f"{name} {out!r} is out of range: use {meta['min']} to {meta['max']}")
    if "choices" in meta and out not in meta["choices"]:
        raise LayerError(f"{name} {out!r} is not one of {', '.join(meta['choices'])}")
    return out


def check_layer(raw: Mapping[str, object]) -> dict[str, object]:
    """The layer's known fields, checked; unknown keys dropped. Raises :class:`LayerError`."""
    by_name = {f.name: f for f in FIELDS}
    return {key: _check(by_name[key], value) for key, value in raw.items() if key in by_name}


def resolve(
    instance: Mapping[str, object] | None,
    workspace: Mapping[str, object] | None,
    *,
    overrides: Mapping[str, object] | None = None,
    problems: tuple[str, ...] = (),
) -> Loaded:
    """Defaults ← instance ← workspace ← ``overrides`` (command-line flags), field by field. The
    workspace layer is first stripped of what it may not set (:func:`workspace_layer`)."""
    found = list(problems)
    operator = _checked_layers((("instance", instance), ("command line", overrides)), [])
    if workspace is not None:
        offered = offered_providers(EngineSettings(**operator[0]))  # type: ignore[arg-type]
        workspace, dropped = workspace_layer(workspace, offered)
        found.extend(f"a workspace setting was ignored: {why}" for why in dropped)
    layers: tuple[tuple[Origin, Mapping[str, object] | None], ...] = (
        ("instance", instance),
        ("workspace", workspace),
        ("command line", overrides),
    )
    values, origin = _checked_layers(layers, found)
    return Loaded(EngineSettings(**values), origin, tuple(found))  # type: ignore[arg-type]


def _checked_layers(
    layers: tuple[tuple[Origin, Mapping[str, object] | None], ...], found: list[str]
) -> tuple[dict[str, object], dict[str, Origin]]:
    values: dict[str, object] = {}
    origin: dict[str, Origin] = dict.fromkeys(NAMES, "default")
    for label, raw in layers:
        if raw is None:
            continue
        try:
            checked = check_layer(raw)
        except LayerError as exc:
            found.append(f"the {label} settings were ignored: {exc}")
            continue
        values.update(checked)
        origin.update(dict.fromkeys(checked, label))
    return values, origin


def workspace_layer(
    raw: Mapping[str, object], offered: tuple[str, ...]
) -> tuple[dict[str, object], list[str]]:
    """A workspace layer without the keys it may not set (:data:`INSTANCE_ONLY`, a provider the
    operator does not offer), and why each was dropped (pure)."""
    kept = {k: v for k, v in raw.items() if k not in INSTANCE_ONLY}
    dropped = [operator_only(k) for k in sorted(set(raw) & INSTANCE_ONLY)]
    provider = kept.get("embedding_provider")
    if isinstance(provider, str) and provider in PROVIDERS and provider not in offered:
        dropped.append(not_offered(provider, offered))
        del kept["embedding_provider"]
    return kept, dropped


def read_layer(path: Path | None, label: str) -> tuple[dict[str, object] | None, str | None]:
    """A settings file as a mapping (JSON, or TOML when it ends in ``.toml``), or why it is unusable.

    A missing workspace file is simply no layer; any other unreadable file is a discarded layer.
    """
    if path is None:
        return None, None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if label == "workspace":
            return None, None
        return None, f"the {label} settings were ignored: {path} does not exist"
    except OSError as exc:
        return None, f"the {label} settings were ignored: {path} cannot be read ({exc.strerror or exc})"
    try:
        data: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        return None, f"the {label} settings were ignored: {path} is not valid {kind} ({exc})"
    if not isinstance(data, dict):
        return None, f"the {label} settings were ignored: {path} must hold an object of settings"
    return data, None


def load(
    instance_file: Path | None, workspace_root: Path, overrides: Mapping[str, object] | None = None
) -> Loaded:
    """Both layers read from disk and resolved (the engine's composition root calls this once)."""
    instance, p1 = read_layer(instance_file, "instance")
    workspace, p2 = read_layer(workspace_root / WORKSPACE_FILE, "workspace")
    return resolve(instance, workspace, overrides=overrides, problems=tuple(p for p in (p1, p2) if p))


def scrub_restored(path: Path) -> list[str]:
    """Remove from a restored workspace ``settings.json`` the keys a workspace may not set
    (:data:`INSTANCE_ONLY`: an export from elsewhere must not choose where this host sends
    memories), rewriting it in place; one warning per key removed. A file that is not a JSON
    object is left alone: the engine ignores such a layer whole when it starts."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or not set(data) & INSTANCE_ONLY:
        return []
    removed = sorted(set(data) & INSTANCE_ONLY)
    kept = {k: v for k, v in data.items() if k not in INSTANCE_ONLY}
    fsio.write_atomic(path, (json.dumps(kept, indent=2, sort_keys=True) + "\n").encode())
    return [f"the export's {WORKSPACE_FILE} set {name}, which is the operator's; removed" for name in removed]


def report(loaded: Loaded) -> dict[str, Any]:
    """What ``memory_status`` shows: each value and where it came from, and any discarded layer."""
    return {
        "values": dataclasses.asdict(loaded.settings),
        "origin": dict(loaded.origin),
        "problems": list(loaded.problems),
    }
