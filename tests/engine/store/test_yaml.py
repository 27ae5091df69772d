"""The store's YAML loader is bounded (``rel:fuzz``): an alias bomb, a recursive alias, deep
nesting or a huge block is refused at once, with the limit it passed; within the limits it reads
what PyYAML reads; what the store writes never holds an alias."""

from __future__ import annotations

import functools
import json
import time
import tracemalloc
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from engine.store import _yaml
from tests import hostile_store

#: Generous for a few hundred bytes of YAML on a loaded machine; an expansion takes minutes.
BOUND_S = 2.0
BOUND_BYTES = 16 * 1024 * 1024


def refused(text: str) -> str:
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(_yaml.Refused) as caught:
            _yaml.load(text)
        took = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert took < BOUND_S, took
    assert peak < BOUND_BYTES, peak
    return str(caught.value)


@pytest.mark.req("rel:fuzz")
def test_an_alias_bomb_is_refused_without_being_expanded() -> None:
    assert len(hostile_store.alias_bomb().encode()) < 500
    assert f"more than {_yaml.MAX_NODES:,} values" in refused(hostile_store.alias_bomb())


@pytest.mark.req("rel:fuzz")
def test_a_smaller_bomb_is_refused_by_its_expanded_size_not_its_text() -> None:
    text = hostile_store.alias_bomb(levels=3, width=25)  # 25³ = 15,625 values in ~300 bytes
    assert "values" in refused(text)


@pytest.mark.req("rel:fuzz")
def test_a_recursive_alias_is_refused() -> None:
    assert "recursive" in refused(hostile_store.recursive_alias())


@pytest.mark.req("rel:fuzz")
def test_deep_nesting_is_refused_also_through_aliases() -> None:
    assert f"deeper than {_yaml.MAX_DEPTH}" in refused(hostile_store.deep_nesting())
    # each half is within the limit; an alias joins them past it (a remembered node's height counts)
    half = _yaml.MAX_DEPTH // 2 + 2
    joined = f"a: &a {'[' * half}{']' * half}\nb: {'[' * half}*a{']' * half}"
    assert _yaml.load(f"a: {'[' * half}{']' * half}") is not None
    assert "deeper" in refused(joined)


@pytest.mark.req("rel:fuzz")
def test_a_block_longer_than_the_limit_is_refused_before_parsing() -> None:
    assert f"{_yaml.MAX_BLOCK_CHARS:,}" in refused(hostile_store.huge_frontmatter())


def test_aliases_within_the_limits_read_as_pyyaml_reads_them() -> None:
    text = "base: &b {x: 1, y: [a, b]}\none: *b\ntwo: {<<: *b, y: 2}\n"
    assert _yaml.load(text) == yaml.safe_load(text)


def test_what_the_store_writes_never_holds_an_alias() -> None:
    shared = ["a", "b"]
    written = _yaml.dump({"one": shared, "two": shared, "three": {"k": shared}})
    assert "&" not in written and "*" not in written
    assert _yaml.load(written) == {"one": shared, "two": shared, "three": {"k": shared}}


printable = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | printable,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(printable, inner, max_size=5),
    max_leaves=40,
)


@given(values, st.integers(1, 8), st.integers(1, 6))
def test_any_value_reads_back_or_is_refused_for_a_limit_it_really_passes(
    value: Any, uses: int, levels: int
) -> None:
    """A value used ``uses`` times per level for ``levels`` levels: read when its expansion fits,
    refused (and only then) when it does not."""
    lines = [f"v0: &v0 {json.dumps(value)}"]
    for level in range(1, levels + 1):
        lines.append(f"v{level}: &v{level} [" + ", ".join([f"*v{level - 1}"] * uses) + "]")
    text = "\n".join(lines)
    expected = yaml.safe_load(text)

    @functools.cache
    def shared(key: int) -> tuple[int, int]:  # (values, height) of the object with this id, once
        v = objects[key]
        items = list(v) if isinstance(v, list) else [*v, *v.values()] if isinstance(v, dict) else []
        below = [shared(remember(x)) for x in items]
        return 1 + sum(c for c, _ in below), 1 + max((h for _, h in below), default=0)

    objects: dict[int, Any] = {}

    def remember(v: Any) -> int:
        objects[id(v)] = v
        return id(v)

    def count(v: Any) -> int:
        return shared(remember(v))[0]

    def height(v: Any) -> int:
        return shared(remember(v))[1]

    fits = count(expected) <= _yaml.MAX_NODES and height(expected) - 1 <= _yaml.MAX_DEPTH
    if fits:
        assert _yaml.load(text) == expected
    else:
        with pytest.raises(_yaml.Refused):
            _yaml.load(text)
