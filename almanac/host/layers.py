"""The two config layers memory settings are read from (``settings:layers``, ``settings:strict``).

- **Instance-wide base**: the host's own config file, under ``memory``.
- **Per workspace**: the workspace's config file, under ``defaults.memory``.

Either file is JSON, or TOML when its name ends in ``.toml``. A workspace value wins over the
instance value field by field; what neither layer sets is the default (:class:`HostSettings`).

A layer with a bad value — a wrong type, an unknown provider name, a number out of range, or a file
that cannot be read or parsed — is discarded *whole*, with one warning naming the file and the
field, and the layer below is used: ultimately the defaults, where memory is off. An unknown key is
ignored and the layer still works (a key written by a newer host must not disable an older one).
A missing file, or a file without the section, is simply no layer.

Each effective value carries its origin: ``Workspace override``, ``Instance default`` or
``Default``. :func:`clear_override` drops one workspace value, so the field reverts to the instance
default. Settings are read once, when a session starts (:func:`load_settings`); a change applies to
sessions started afterwards.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from almanac.host.settings import ALIASES, HostSettings, HostSettingsError, check, field_name

log = logging.getLogger("almanac.host")

Origin = Literal["Workspace override", "Instance default", "Default"]
WORKSPACE: Origin = "Workspace override"
INSTANCE: Origin = "Instance default"
DEFAULT: Origin = "Default"
#: Where each layer's settings sit inside its file.
INSTANCE_SECTION = ("memory",)
WORKSPACE_SECTION = ("defaults", "memory")
#: A config file larger than this is not read (a bad layer): the files are small by nature.
MAX_FILE_BYTES = 1 << 20

_KINDS = {f.name: str(f.type) for f in fields(HostSettings)}


class LayerError(ValueError):
    """Why a layer was discarded; the message names the file and the field."""


@dataclass(frozen=True)
class Layered:
    """The effective settings, where each value came from, and one warning per discarded layer."""

    settings: HostSettings
    origin: Mapping[str, Origin]
    warnings: tuple[str, ...] = ()

    def origin_of(self, key: str) -> Origin:
        """The origin of a field, by either spelling (``topK`` or ``top_k``)."""
        name = field_name(key)
        if name is None:
            raise KeyError(f"no memory setting is called {key!r}")
        return self.origin[name]

    def rows(self) -> list[tuple[str, object, Origin]]:
        """Each setting as (the document's spelling, value, origin), in the settings' order."""
        spelling = {name: key for key, name in ALIASES.items()}
        return [
            (spelling.get(name, name), getattr(self.settings, name), self.origin[name])
            for name in self.origin
        ]


def section_of(data: Mapping[str, Any], path: tuple[str, ...], where: str) -> Mapping[str, Any] | None:
    """The settings object at ``path`` inside a parsed file; None when the file does not set it."""
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    if not isinstance(node, Mapping):
        raise LayerError(f"{where}: {'.'.join(path)} must be an object of settings, not {node!r}")
    return node


def check_layer(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The layer's known fields by their Python names, each checked; unknown keys dropped.
    Raises :class:`LayerError` naming ``where`` (file and section) and the field as written."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = field_name(key) if isinstance(key, str) else None
        if name is None:
            continue
        try:
            check(name, _KINDS[name], value)
        except HostSettingsError as exc:
            raise LayerError(f"{where}.{key}: {exc}") from None
        out[name] = value
    return out


def merge(
    instance: Mapping[str, Any] | None,
    workspace: Mapping[str, Any] | None,
    *,
    instance_where: str = "instance layer",
    workspace_where: str = "workspace layer",
) -> Layered:
    """Defaults ← instance ← workspace, field by field (pure). A layer with a bad value is left
    out whole; the warnings say which and why."""
    values: dict[str, Any] = {}
    origin: dict[str, Origin] = dict.fromkeys(_KINDS, DEFAULT)
    warnings: list[str] = []
    for raw, where, label in ((instance, instance_where, INSTANCE), (workspace, workspace_where, WORKSPACE)):
        if raw is None:
            continue
        try:
            checked = check_layer(raw, where)
        except LayerError as exc:
            warnings.append(f"memory settings ignored (the whole layer): {exc}")
            continue
        values.update(checked)
        origin.update(dict.fromkeys(checked, label))
    return Layered(HostSettings(**values), origin, tuple(warnings))


def read_layer(path: Path | None, section: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The settings section of a config file; None when there is no file or no section. Raises
    :class:`LayerError` for a file that cannot be read or parsed, or a section that is not an object."""
    if path is None:
        return None
    where = f"{path}"
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LayerError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise LayerError(f"{where}: larger than {MAX_FILE_BYTES:,} bytes")
    kind = "TOML" if path.suffix == ".toml" else "JSON"
    try:
        text = data.decode("utf-8")
        parsed: Any = tomllib.loads(text) if kind == "TOML" else json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise LayerError(f"{where}: not valid {kind} ({exc})") from None
    if not isinstance(parsed, dict):
        raise LayerError(f"{where}: must hold an object")
    return section_of(parsed, section, where)


def load_settings(instance_file: Path | None, workspace_file: Path | None) -> Layered:
    """Both layers read from disk and merged; one warning logged per discarded layer. Call it once,
    when a session starts."""
    layers: list[Mapping[str, Any] | None] = []
    warnings: list[str] = []
    for path, section in ((instance_file, INSTANCE_SECTION), (workspace_file, WORKSPACE_SECTION)):
        try:
            layers.append(read_layer(path, section))
        except LayerError as exc:
            warnings.append(f"memory settings ignored (the whole layer): {exc}")
            layers.append(None)
    merged = merge(
        layers[0],
        layers[1],
        instance_where=f"{instance_file}: {'.'.join(INSTANCE_SECTION)}",
        workspace_where=f"{workspace_file}: {'.'.join(WORKSPACE_SECTION)}",
    )
    found = (*warnings, *merged.warnings)
    for warning in found:
        log.warning("%s", warning)
    return Layered(merged.settings, merged.origin, found)


def clear_override(workspace_file: Path, key: str) -> bool:
    """Drop the workspace's value of the setting ``key`` (either spelling), so the field reverts to
    the instance default. Returns whether there was one to drop. The file must be JSON; the rest of
    it is kept as it was, and the change is written atomically."""
    name = field_name(key)
    if name is None:
        raise KeyError(f"no memory setting is called {key!r}")
    if workspace_file.suffix == ".toml":
        raise LayerError(f"{workspace_file}: clearing an override needs a JSON workspace file")
    try:
        data: Any = json.loads(workspace_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except ValueError as exc:
        raise LayerError(f"{workspace_file}: not valid JSON ({exc}); fix it by hand") from None
    section = section_of(data, WORKSPACE_SECTION, str(workspace_file)) if isinstance(data, dict) else None
    if section is None:
        return False
    spellings = [k for k in section if field_name(k) == name]
    if not spellings:
        return False
    assert isinstance(section, dict)
    for spelling in spellings:
        del section[spelling]
    _write_atomic(workspace_file, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return True


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
