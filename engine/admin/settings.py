"""``/admin/settings``: the owner reads and changes the workspace layer of the engine's settings.

``GET`` answers every setting (:data:`engine.settings.FIELDS`) with what it does, its kind and
limits, the value this engine runs with and where that came from (default, instance, workspace),
the value it *inherits* (instance file or built-in default, what *Clear* goes back to), whether the
workspace overrides it, and the embedding provider's state and notes.

``POST`` ``{"set": {name: value}, "clear": [name]}`` changes ``settings.json`` in the workspace.
Each value is checked on its own (a string is read as the field's kind, so a form's text works);
any refusal answers 400 with ``fields`` (name → what to fix) and writes nothing. What decides where
memories are sent is the operator's (``sec:authz``): a field of :data:`engine.settings.INSTANCE_ONLY`
is refused, and so is a provider the operator has not offered (never a silent fallback). A workspace
file that cannot be read (not JSON) is reported in ``problems`` and replaced by the next save.
Settings are read when an engine starts, so a change is *saved* here and takes effect when the
engine restarts — the reply's ``restart_needed`` says so, and the gateway restarts the engine after
a change.

Pure: :func:`describe`, :func:`coerce`, :func:`apply`. I/O: the two handlers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine import settings as es
from engine.admin.common import Parts, refusing
from engine.errors import InvalidInput
from engine.store import fsio
from engine.tools import without_paths

log = logging.getLogger("almanac.engine.admin")


def owner_view(provider: dict[str, Any]) -> dict[str, Any]:
    """The provider's status as the owner's Settings page shows it: like ``memory_status``, its
    detail and notes never name a server path (the engine's own log keeps them)."""
    detail = without_paths(str(provider.get("detail") or ""))
    return {
        **provider,
        "detail": detail,
        "notes": [without_paths(str(n)) for n in provider.get("notes") or ()],
    }


#: What each setting does, in the words the dashboard shows (a test keeps it complete).
HELP: dict[str, str] = {
    "half_life_days": "Days until an ordinary note's decay score halves when nothing cites it.",
    "include_archived": "Whether get_context also reaches archived notes when the caller does not say.",
    "max_tokens_default": "get_context's token budget when the caller does not give one.",
    "facts_share": "The share of get_context's budget that facts may take (0 to 1).",
    "min_match_score": "Match confidence a search needs to count as relevant (0 to 1).",
    "match_floor": "Match confidence below which get_context never lists a memory (0 to 1).",
    "notes_limit": "Notes one search may return.",
    "facts_limit": "Facts one search may return.",
    "embedding_provider": "How memories are embedded: local model, Vertex AI, or off (keywords only).",
    "vertex_project": "Vertex AI project (empty: the credentials' own project).",
    "vertex_location": "Vertex AI region.",
    "vertex_base_url": "Another Vertex endpoint, e.g. a private one (empty: Google's).",
    "vertex_batch_size": "Texts sent per Vertex request.",
    "vertex_offered": "Whether workspaces may choose Vertex AI (the operator's instance settings only).",
    "log_queries": "Write the query itself to the retrieval log (otherwise only its SHA-256).",
    "retrieval_log_max_bytes": "Size in bytes at which the retrieval log is rotated.",
}
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Ageing", ("half_life_days", "include_archived")),
    (
        "Recall (get_context)",
        (
            "max_tokens_default",
            "facts_share",
            "min_match_score",
            "match_floor",
            "notes_limit",
            "facts_limit",
        ),
    ),
    (
        "Embeddings",
        (
            "embedding_provider",
            "vertex_project",
            "vertex_location",
            "vertex_base_url",
            "vertex_batch_size",
            "vertex_offered",
        ),
    ),
    ("Retrieval log", ("log_queries", "retrieval_log_max_bytes")),
)
_BY_NAME = {f.name: f for f in es.FIELDS}


def kind_of(f: dataclasses.Field[Any]) -> tuple[str, bool]:
    """(``bool`` | ``int`` | ``float`` | ``str``, whether it may be empty) of a settings field."""
    hint = str(f.type)
    return hint.split(" ")[0].split("|")[0].strip(), "None" in hint


def coerce(name: str, value: object) -> object:
    """``value`` for setting ``name``, checked; a string is read as the field's kind. Raises
    :class:`engine.settings.LayerError` saying what to fix."""
    f = _BY_NAME.get(name)
    if f is None:
        raise es.LayerError(f"there is no setting called {name!r}")
    kind, optional = kind_of(f)
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        if kind == "bool":
            if text.lower() not in ("true", "false"):
                raise es.LayerError(f"{name} must be true or false, not {value!r}")
            value = text.lower() == "true"
        else:
            try:
                value = int(text) if kind == "int" else float(text)
            except ValueError:
                what = "a whole number" if kind == "int" else "a number"
                raise es.LayerError(f"{name} must be {what}, not {value!r}") from None
    elif isinstance(value, str) and optional and not value.strip():
        value = None
    return es.check_layer({name: value})[name]


def apply(
    layer: Mapping[str, object],
    changes: Mapping[str, object],
    clear: list[str],
    *,
    offered: tuple[str, ...],
) -> tuple[dict[str, object], dict[str, str]]:
    """The workspace layer after ``changes`` and ``clear``, and the refusals by field (pure).

    Keys this build does not know are kept (a newer build wrote them); a known key holding a bad
    value is dropped (it would make the whole layer be ignored), and so is one a workspace may not
    set (it would be ignored). ``offered``: the providers the operator lets workspaces choose."""
    errors: dict[str, str] = {}
    checked: dict[str, object] = {}
    for name, value in changes.items():
        try:
            if name in es.INSTANCE_ONLY:
                raise es.LayerError(es.operator_only(name))
            checked[name] = coerce(name, value)
            if name == "embedding_provider" and checked[name] not in offered:
                raise es.LayerError(es.not_offered(str(checked[name]), offered))
        except es.LayerError as exc:
            errors[name] = str(exc)
    for name in clear:
        if name not in _BY_NAME:
            errors[name] = f"there is no setting called {name!r}"
    kept: dict[str, object] = {}
    for key, value in es.workspace_layer(layer, offered)[0].items():
        if key in _BY_NAME:
            try:
                es.check_layer({key: value})
            except es.LayerError:
                continue
        kept[key] = value
    merged = {k: v for k, v in {**kept, **checked}.items() if k not in clear}
    return merged, errors


def describe(
    running: es.Loaded, on_disk: es.Loaded, inherited: es.EngineSettings, provider: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``GET`` reply (pure): running values, what the files now say, what Clear goes back to.
    A field only the operator sets says so (``instance_only``); the provider's ``choices`` are
    the ones offered to this workspace."""
    defaults = es.EngineSettings()
    offered = es.offered_providers(inherited)
    fields = []
    for group, names in GROUPS:
        for name in names:
            f = _BY_NAME[name]
            kind, optional = kind_of(f)
            meta = f.metadata
            fields.append(
                {
                    "name": name,
                    "group": group,
                    "help": HELP[name],
                    "kind": kind,
                    "optional": optional,
                    "min": meta.get("min"),
                    "max": meta.get("max"),
                    "choices": list(offered if name == "embedding_provider" else meta.get("choices", ())),
                    "instance_only": name in es.INSTANCE_ONLY,
                    "default": getattr(defaults, name),
                    "value": getattr(running.settings, name),
                    "origin": running.origin[name],
                    "saved": getattr(on_disk.settings, name),
                    "override": on_disk.origin[name] == "workspace",
                    "inherited": getattr(inherited, name),
                }
            )
    return {
        "fields": fields,
        "problems": list(on_disk.problems),
        "restart_needed": on_disk.settings != running.settings,
        "provider": provider,
    }


class _Settings:
    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.path = parts.workspace.root / es.WORKSPACE_FILE

    def _read(self) -> tuple[dict[str, object], es.Loaded, es.EngineSettings]:
        instance, p1 = es.read_layer(self.parts.instance_file, "instance")
        workspace, p2 = es.read_layer(self.path, "workspace")
        overrides = self.parts.overrides
        problems = tuple(p for p in (p1, p2) if p)
        on_disk = es.resolve(instance, workspace, overrides=overrides, problems=problems)
        inherited = es.resolve(instance, None, overrides=overrides).settings
        return dict(workspace or {}), on_disk, inherited

    def reply(self) -> dict[str, Any]:
        _, on_disk, inherited = self._read()
        running = self.parts.settings or on_disk
        status = self.parts.indexer.status if self.parts.indexer is not None else None
        provider = None if status is None else status.to_json()
        if provider is not None and self.parts.indexer is not None:
            provider["running"] = self.parts.indexer.embedder.provider
        return describe(running, on_disk, inherited, None if provider is None else owner_view(provider))

    async def get(self, request: Request) -> Response:
        return JSONResponse(self.reply())

    async def post(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            raise InvalidInput('the body must be JSON: {"set": {name: value}, "clear": [name]}') from None
        shape = 'the body must be {"set": {name: value, ...}, "clear": [name, ...]}'
        if not isinstance(body, dict) or set(body) - {"set", "clear"}:
            raise InvalidInput(shape)
        changes, clear = body.get("set", {}), body.get("clear", [])
        if not isinstance(changes, dict) or not isinstance(clear, list):
            raise InvalidInput(shape)
        if not all(isinstance(c, str) for c in clear):
            raise InvalidInput(shape)
        with self.parts.workspace.lock:
            layer, _, inherited = self._read()
            merged, errors = apply(layer, changes, clear, offered=es.offered_providers(inherited))
            if errors:
                message = "; ".join(errors.values())
                refused = {"error": {"code": "invalid_input", "message": message, "fields": errors}}
                return JSONResponse(refused, status_code=400)
            if merged != layer:
                data = (json.dumps(merged, indent=2, sort_keys=True) + "\n").encode()
                fsio.write_atomic(self.path, data)
                log.info("workspace settings saved: set %s, cleared %s", sorted(changes), sorted(clear))
        return JSONResponse(self.reply())


def routes(parts: Parts) -> list[BaseRoute]:
    handlers = _Settings(parts)
    return [
        Route("/admin/settings", refusing(handlers.get), methods=["GET"]),
        Route("/admin/settings", refusing(handlers.post), methods=["POST"]),
    ]
