"""YAML in and out, the same way everywhere (libyaml when present), bounded (``rel:fuzz``).

Every block the store reads (a note's frontmatter, a ledger event) is parsed with limits, because
YAML's aliases let a few hundred bytes stand for billions of values (an "alias bomb"): parsing
keeps the sharing and is quick, but anything that walks the result (the YAML memo, a rewrite, a
comparison) walks the expanded tree. So a block is first *composed* (libyaml's node graph, where
an alias is the node it names, not a copy), the graph is measured as if every alias were
expanded, and only a block within the limits is turned into values:

- at most :data:`MAX_BLOCK_CHARS` characters of text;
- at most :data:`MAX_NODES` values once every alias is expanded (a scalar, a list and a mapping
  count one each; each use of an alias counts everything it stands for);
- at most :data:`MAX_DEPTH` levels of nesting, aliases followed; an alias inside what it names
  (a recursive structure) is refused.

A block past a limit raises :class:`Refused`, saying which. The store never writes aliases: the
dumper writes a value used twice out in full.
"""

from __future__ import annotations

from typing import Any, Final

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

YAMLError = yaml.YAMLError

#: The longest block (frontmatter, ledger event) read, in characters.
MAX_BLOCK_CHARS: Final = 64 * 1024
#: The most values a block may hold with every alias expanded.
MAX_NODES: Final = 10_000
#: The deepest nesting a block may have, aliases followed.
MAX_DEPTH: Final = 64

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Refused(ValueError):
    """A YAML block past the store's limits (see the module); the message says which."""


class _Dumper(_BaseDumper):  # type: ignore[misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True  # a value used twice is written twice: the store's YAML never has aliases


def check_size(text: str) -> None:
    """:class:`Refused` when ``text`` is longer than :data:`MAX_BLOCK_CHARS` (before any parsing)."""
    if len(text) > MAX_BLOCK_CHARS:
        raise Refused(f"it is {len(text):,} characters long; the most read is {MAX_BLOCK_CHARS:,}")


def expanded_size(root: Node) -> int:
    """How many values ``root`` holds with every alias expanded: :class:`Refused` as soon as that
    passes :data:`MAX_NODES`, the nesting passes :data:`MAX_DEPTH`, or an alias is recursive.

    Each node of the graph is measured once (a shared node's size and height are remembered), so
    the cost is the size of the text, not of the expansion."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels below it)
    open_nodes: set[int] = set()

    def measure(node: Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in open_nodes:
            raise Refused("an alias refers to a value that contains it (a recursive structure)")
        found = measured.get(key)
        if found is None:
            if depth > MAX_DEPTH:
                raise Refused(f"it nests deeper than {MAX_DEPTH} levels")
            total, height = 1, 0
            if isinstance(node, SequenceNode | MappingNode):
                open_nodes.add(key)
                children: list[Node] = (
                    list(node.value)
                    if isinstance(node, SequenceNode)
                    else [part for pair in node.value for part in pair]
                )
                for child in children:
                    size, below = measure(child, depth + 1)
                    total += size
                    height = max(height, below + 1)
                    if total > MAX_NODES:
                        raise Refused(
                            f"it holds more than {MAX_NODES:,} values once its aliases are expanded"
                        )
                open_nodes.discard(key)
            found = measured[key] = (total, height)
        if depth + found[1] > MAX_DEPTH:
            raise Refused(f"it nests deeper than {MAX_DEPTH} levels")
        return found

    return measure(root, 0)[0]


def load(text: str) -> Any:
    """The values of one YAML block, within the limits (:class:`Refused` past them; a
    :data:`YAMLError` when it is not YAML)."""
    check_size(text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def dump(data: dict[str, Any]) -> str:
    out: str = yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1_000_000, default_flow_style=False
    )
    return out
