"""Argument failures worded like every other refusal: the field, what is allowed, a ``[code]``.

The SDK validates a call's arguments against the tool's input schema with pydantic; its raw message
(a dump with a link to pydantic's site) is replaced by one built from the same schema the agent
read in ``tools/list``. No library internals, no URLs, no echo of the rejected value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

INVALID_ARGUMENT = "invalid_argument"
UNKNOWN_TOOL = "unknown_tool"

_JSON_TYPES = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def expected(schema: Mapping[str, Any]) -> str:
    """What a property's JSON schema allows, in words: "a string", "a list of strings or null"."""
    options = schema.get("anyOf")
    if options:  # an optional parameter is "X or null": say X (leaving it out is what null means)
        words = [expected(option) for option in options if option.get("type") != "null"]
        return " or ".join(dict.fromkeys(words))
    kind = schema.get("type")
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        item = expected(schema["items"])
        return f"a list of {item.removeprefix('a ').removeprefix('an ')}s"
    return _JSON_TYPES.get(str(kind), "a value of the documented type")


def _field_problem(field: str, error: Mapping[str, Any], properties: Mapping[str, Any]) -> str:
    schema = properties.get(field, {})
    described = schema.get("description")
    allowed = expected(schema)
    hint = f" ({described})" if described else ""
    if error.get("type") == "missing":
        return f"{field} is required: pass {allowed}{hint}"
    if field not in properties:
        return f"{field} is not a parameter of this tool"
    return f"{field} must be {allowed}, not {_kind(error.get('input'))}{hint}"


def argument_message(tool: str, schema: Mapping[str, Any], errors: Iterable[Mapping[str, Any]]) -> str:
    """One message for every field that failed, e.g.
    ``remember: statement is required: pass a string (The words…) [invalid_argument]``."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    problems: dict[str, str] = {}
    for error in errors:
        loc: Sequence[Any] = error.get("loc", ())
        field = str(loc[0]) if loc else "arguments"
        problems.setdefault(field, _field_problem(field, error, properties))
    required = schema.get("required", [])
    signature = ", ".join(f"{name}{'' if name in required else '?'}" for name in properties)
    listed = "; ".join(problems.values()) or "the arguments do not match the tool's input schema"
    return f"{tool}: {listed}. It takes ({signature}) [{INVALID_ARGUMENT}]"


def unknown_tool_message(name: str, available: Iterable[str]) -> str:
    tools = ", ".join(sorted(available))
    return f"there is no tool named {name!r}: call one of {tools} [{UNKNOWN_TOOL}]"


_PYDANTIC_TYPES = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "a list",
    "literal_error": "one of the values the method allows",
    "enum": "one of the values the method allows",
}


def params_message(method: str, errors: Iterable[Mapping[str, Any]]) -> str:
    """A request whose params do not fit its method, e.g. ``invalid params for prompts/get: name is
    required``: the fields and what they must be, never the rejected values."""
    problems: dict[str, str] = {}
    for error in errors:
        loc = [str(part) for part in error.get("loc", ()) if not isinstance(part, int)]
        if loc[:1] == ["params"]:
            loc = loc[1:]
        field = ".".join(loc) or "params"
        kind = str(error.get("type", ""))
        if kind == "missing":
            problems.setdefault(field, f"{field} is required")
        else:
            allowed = _PYDANTIC_TYPES.get(kind, "a valid value")
            problems.setdefault(field, f"{field} must be {allowed}, not {_kind(error.get('input'))}")
    listed = "; ".join(problems.values()) or "they do not match the method's params"
    return f"invalid params for {method}: {listed}"
