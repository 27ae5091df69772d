"""The ``<memory>`` block spliced into a turn's context (pure).

Memories are context, not quotations: the block tells the model to use them and not to cite them
unless asked. One memory is cut at ``max_item_chars``; the block never exceeds ``max_block_chars``.
A reply that Almanac marks not relevant (nothing closely matched) gives no block at all: supplying
the nearest-but-wrong memories confidently is worse than supplying none. The block holds only what
``get_context`` listed, and that is never a memory below its match floor (``match_floor``). A
memory from cold storage (``archived``) starts with its cold-storage banner, whichever part of it
was found.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

PREAMBLE = (
    "Memories saved in earlier sessions that may bear on this message. Use them as background "
    "context; do not cite or mention them unless the user asks."
)
CUT_MARK = "…"
#: The banner's first line, for an archived item that does not carry its own ``banner``.
COLD = "> **⚠️ From cold storage — this was true at one time, but it may not be true now.**"
_OPEN, _CLOSE = "<memory>", "</memory>"


def cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters long, ending in the cut mark when it was cut."""
    if len(text) <= limit:
        return text
    return text[: limit - len(CUT_MARK)].rstrip() + CUT_MARK


def with_banner(text: str, archived: bool, banner: object = None) -> str:
    """``text`` of a memory, starting with its cold-storage banner when it is archived (once)."""
    text = text.strip()
    if archived:  # cold content never travels without its banner
        banner = banner.strip() if isinstance(banner, str) and banner.strip() else COLD
        if not text.startswith(banner.split("\n", 1)[0]):
            text = f"{banner}\n{text}"
    return text


def items(context: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """The memories of a ``get_context`` reply in its own order, facts first, then notes: each as
    its id (``""`` when it has none), its text (with its banner when archived) and its scope."""
    for kind in ("facts", "notes"):
        found = context.get(kind)
        if not isinstance(found, list):
            continue
        for item in found:
            text = item.get("text") if isinstance(item, Mapping) else None
            if not isinstance(text, str) or not text.strip():
                continue
            assert isinstance(item, Mapping)
            scope = item.get("scope")
            text = with_banner(text, item.get("archived") is True, item.get("banner"))
            yield str(item.get("id", "")), text, scope if isinstance(scope, str) else None


def texts(context: Mapping[str, Any]) -> Iterator[str]:
    """The memories of a ``get_context`` reply in its own order: facts first, then notes."""
    for _, text, _ in items(context):
        yield text


def assemble(
    memories: Iterable[str], *, max_item_chars: int = 1_000, max_block_chars: int = 8_000
) -> tuple[str, list[int]]:
    """The block holding ``memories`` in order (each cut at ``max_item_chars``, the block within
    ``max_block_chars``), and the positions of those it holds; ``""`` when none."""
    head = f"{_OPEN}\n{PREAMBLE}\n"
    size = len(head) + len(_CLOSE)
    lines: list[str] = []
    kept: list[int] = []
    for position, text in enumerate(memories):
        line = "- " + cut(text, max_item_chars).replace("\n", "\n  ") + "\n"
        if size + len(line) > max_block_chars:
            continue  # a shorter, lower-ranked memory may still fit
        lines.append(line)
        kept.append(position)
        size += len(line)
    if not lines:
        return "", []
    return head + "".join(lines) + _CLOSE, kept


def memory_block(
    context: Mapping[str, Any], *, max_item_chars: int = 1_000, max_block_chars: int = 8_000
) -> str:
    """The block for one turn, or ``""`` when there is nothing relevant to add."""
    if context.get("relevant") is not True:
        return ""
    return assemble(texts(context), max_item_chars=max_item_chars, max_block_chars=max_block_chars)[0]
