"""The engine's settings (``settings:layers``, ``settings:strict``): one frozen value, read once at start.

Two layers over the built-in defaults, lowest first:

- the **instance** layer: the operator's file, given as ``--settings FILE`` (the gateway passes its
  ``engine_settings_file`` to every engine it starts);
- the **workspace** layer: ``settings.json`` in the workspace directory.

A workspace value wins over the instance value field by field; what neither sets is the default.
A layer holding a bad value (wrong type, unknown enum value, number out of range) is discarded
*whole*, with a logged reason, and the layer below is used; an unknown key is ignored and the layer
still works (a key written by a newer build must not disable an older one). Each field remembers
where its value came from, for ``memory_status`` and the dashboard's badges.

:func:`resolve` is pure over the two mappings; :func:`read_layer` is the only I/O here.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
    # the retrieval log (life:retrieval-log)
    log_queries: bool = False
    retrieval_log_max_bytes: int = field(default=1_048_576, metadata={"min": 4096, "max": 1 << 30})


FIELDS: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(EngineSettings)
NAMES = tuple(f.name for f in FIELDS)


class LayerError(ValueError):
    """Why a layer was discarded (the message names the file's field and what to fix)."""


@dataclass(frozen=True)
class Loaded:
    settings: EngineSettings
    origin: Mapping[str, Origin]
    problems: tuple[str, ...] = ()  # one line per discarded layer


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
    """Defaults ← instance ← workspace ← ``overrides`` (command-line flags), field by field."""
    found = list(problems)
    values: dict[str, object] = {}
    origin: dict[str, Origin] = dict.fromkeys(NAMES, "default")
    layers: tuple[tuple[Origin, Mapping[str, object] | None], ...] = (
        ("instance", instance),
        ("workspace", workspace),
        ("command line", overrides),
    )
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
    return Loaded(EngineSettings(**values), origin, tuple(found))  # type: ignore[arg-type]


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


def report(loaded: Loaded) -> dict[str, Any]:
    """What ``memory_status`` shows: each value and where it came from, and any discarded layer."""
    return {
        "values": dataclasses.asdict(loaded.settings),
        "origin": dict(loaded.origin),
        "problems": list(loaded.problems),
    }
