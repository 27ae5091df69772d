"""The scope rules (engine.scope), pure."""

from __future__ import annotations

import pytest

from engine.errors import Forbidden
from engine.scope import Caller, read_scope, shown, visible, within, write_scope

PINNED = Caller(pinned_scope="work")
FREE = Caller()


@pytest.mark.req("recall:scope")
def test_a_limit_sees_its_scope_and_unscoped_memories_only() -> None:
    assert within(None, "home") and within(None, None)
    assert within("work", "work") and within("work", None)
    assert not within("work", "home")


def test_a_pinned_connection_sees_its_scope_and_unscoped_memories() -> None:
    assert visible(PINNED, "work") and visible(PINNED, None) and not visible(PINNED, "home")
    assert visible(FREE, "home")


def test_reads_and_writes_of_a_pinned_connection_stay_in_its_scope() -> None:
    assert read_scope(PINNED, None) == "work" and write_scope(PINNED, None) == "work"
    assert read_scope(FREE, "home") == "home" and write_scope(FREE, None) is None
    with pytest.raises(Forbidden, match="pinned to scope 'work'"):
        read_scope(PINNED, "home")
    with pytest.raises(Forbidden, match="omit scope or pass 'work'"):
        write_scope(PINNED, "home")


def test_recall_lists_archived_memories_only_when_asked() -> None:
    assert shown("live", None, "work", include_archived=False)
    assert not shown("archived", None, None, include_archived=False)
    assert shown("archived", "work", "work", include_archived=True)
    assert not shown("live", "home", "work", include_archived=True)
