"""Note files: YAML frontmatter + the words, whole (pure parse and serialise).

Keys the store owns are written in a fixed order; a key with no value is omitted; keys it does
not own (from imports or hand edits) are kept, in their order, after its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    if note.unread is not None:
        raise ValueError("this note's frontmatter was not read; writing the note would drop it")
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


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """``(frontmatter, rest)`` of a note file: the YAML between a first line ``---`` and the next
    line that is ``---`` or ``...`` (a line's ``\r`` ending ignored), and what follows that line;
    ``(None, text)`` when the first line is not ``---``. ``ValueError`` when it is never closed.

    Walks the lines of the frontmatter only: the body is sliced off whole, never split."""
    first_end = text.find("\n")
    if (text if first_end < 0 else text[:first_end]).rstrip("\r") != "---":
        return None, text
    start = first_end + 1
    pos = start
    while first_end >= 0 and pos <= len(text):
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if line.rstrip("\r") in ("---", "..."):
            return text[start : max(start, pos - 1)], ("" if end < 0 else text[end + 1 :])
        if end < 0:
            break
        pos = end + 1
    raise ValueError("the frontmatter opened with '---' is never closed")


def parse_note(text: str, default_id: str, load: Callable[[str], Any] = _yaml.load) -> Note:
    """Read a note file. A file without frontmatter is all body, named ``default_id``.

    Raises ``ValueError`` when the frontmatter is present but unreadable. ``load`` parses the
    frontmatter's YAML (a :class:`~engine.store.yamlmemo.YamlMemo`'s when a workspace opens).
    A frontmatter past the YAML limits (:class:`~engine.store._yaml.Refused`: an alias bomb, too
    large, too deep) is not read: the note is its body alone, named ``default_id``, with ``unread``
    saying why.
    """
    front: dict[str, Any] = {}
    block, rest = split_frontmatter(text)
    if block is not None:
        try:
            loaded = load(block) if block else {}
        except _yaml.Refused as exc:
            body = rest[:-1] if rest.endswith("\n") else rest
            return Note(id=default_id, body=body, unread=f"its frontmatter was not read: {exc}")
        except _yaml.YAMLError as exc:
            raise ValueError(f"the frontmatter is not valid YAML: {exc}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ValueError("the frontmatter is not a YAML mapping")
        front = cast(dict[str, Any], loaded)
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
