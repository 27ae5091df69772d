"""Note files: YAML frontmatter + the words, whole (pure parse and serialise).

Keys the store owns are written in a fixed order; a key with no value is omitted; keys it does
not own (from imports or hand edits) are kept, in their order, after its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from engine.store import _yaml
from engine.store.model import Note, Source, format_time, parse_time

OWN_KEYS = (
    "id",
    "created",
    "updated",
    "importance",
    "tags",
    "scope",
    "source",
    "source-verified",
    "citations",
    "last-cited",
)


def format_note(note: Note) -> str:
    front: dict[str, Any] = {"id": note.id}
    if note.created is not None:
        front["created"] = format_time(note.created)
    if note.updated is not None:
        front["updated"] = format_time(note.updated)
    if note.importance is not None:
        front["importance"] = note.importance
    if note.tags:
        front["tags"] = list(note.tags)
    if note.scope is not None:
        front["scope"] = note.scope
    if note.source is not None:
        front["source"] = note.source.name
        if note.source.verified:
            front["source-verified"] = True
    if note.citations is not None:
        front["citations"] = note.citations
    if note.last_cited is not None:
        front["last-cited"] = format_time(note.last_cited)
    for key, value in note.extra.items():
        if key not in front and value is not None:
            front[key] = value
    return f"---\n{_yaml.dump(front)}---\n{note.body}\n"


def _time(front: Mapping[str, Any], key: str) -> Any:
    value = front.get(key)
    return None if value is None else parse_time(value)


def parse_note(text: str, default_id: str) -> Note:
    """Read a note file. A file without frontmatter is all body, named ``default_id``.

    Raises ``ValueError`` when the frontmatter is present but unreadable.
    """
    front: dict[str, Any] = {}
    rest = text
    lines = text.split("\n")
    if lines and lines[0].rstrip("\r") == "---":
        for j in range(1, len(lines)):
            if lines[j].rstrip("\r") in ("---", "..."):
                try:
                    loaded = _yaml.load("\n".join(lines[1:j])) if j > 1 else {}
                except _yaml.YAMLError as exc:
                    raise ValueError(f"the frontmatter is not valid YAML: {exc}") from None
                if loaded is None:
                    loaded = {}
                if not isinstance(loaded, dict):
                    raise ValueError("the frontmatter is not a YAML mapping")
                front = cast(dict[str, Any], loaded)
                rest = "\n".join(lines[j + 1 :])
                break
        else:
            raise ValueError("the frontmatter opened with '---' is never closed")
    body = rest[:-1] if rest.endswith("\n") else rest
    tags = front.get("tags")
    if tags is None:
        tag_tuple: tuple[str, ...] = ()
    elif isinstance(tags, str):
        tag_tuple = tuple(t.strip() for t in tags.split(",") if t.strip())
    elif isinstance(tags, list):
        tag_tuple = tuple(str(t) for t in tags if t is not None)
    else:
        raise ValueError("'tags' must be a list")
    importance = front.get("importance")
    if importance is not None and (isinstance(importance, bool) or not isinstance(importance, int | float)):
        raise ValueError("'importance' must be a number from 0 to 1")
    citations = front.get("citations")
    if citations is not None and (isinstance(citations, bool) or not isinstance(citations, int)):
        raise ValueError("'citations' must be a whole number")
    source = front.get("source")
    return Note(
        id=str(front.get("id") or default_id),
        body=body,
        created=_time(front, "created"),
        updated=_time(front, "updated"),
        importance=None if importance is None else float(importance),
        tags=tag_tuple,
        scope=None if front.get("scope") is None else str(front["scope"]),
        source=None if source is None else Source(str(source), front.get("source-verified") is True),
        citations=citations,
        last_cited=_time(front, "last-cited"),
        extra={k: v for k, v in front.items() if k not in OWN_KEYS},
    )
