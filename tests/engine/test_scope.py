"""The scope rules (engine.scope), pure."""

from __future__ import annotations

import pytest

from engine.errors import Forbidden
from engine.scope import Caller, Limit, changeable, read_scope, shown, visible, within, write_scope

PINNED = Caller(pinned_scope="work")
WIDE = Caller(pinned_scope="work", reads_unscoped=True)
FREE = Caller()
WORK = Limit("work")


@pytest.mark.req("recall:scope")
def test_a_limit_sees_its_scope_and_unscoped_memories_only() -> None:
    assert within(None, "home") and within(None, None)
    assert within(WORK, "work") and within(WORK, None)
    assert not within(WORK, "home")
    narrow = Limit("work", unscoped=False)
    assert within(narrow, "work") and not within(narrow, None) and not within(narrow, "home")


@pytest.mark.req("gw:isolation")
def test_a_pinned_connection_sees_unscoped_memories_only_when_the_owner_chose_so() -> None:
    assert visible(PINNED, "work") and not visible(PINNED, None) and not visible(PINNED, "home")
    assert visible(WIDE, "work") and visible(WIDE, None) and not visible(WIDE, "home")
    assert visible(FREE, "home")


@pytest.mark.req("gw:isolation")
def test_a_pinned_connection_changes_only_memories_of_its_own_scope() -> None:
    for caller in (PINNED, WIDE):
        assert changeable(caller, "work") and not changeable(caller, None) and not changeable(caller, "home")
    assert changeable(FREE, None) and changeable(FREE, "home")


def test_reads_and_writes_of_a_pinned_connection_stay_in_its_scope() -> None:
    assert read_scope(PINNED, None) == Limit("work", unscoped=False) and write_scope(PINNED, None) == "work"
    assert read_scope(WIDE, "work") == Limit("work", unscoped=True)
    assert read_scope(FREE, "home") == Limit("home") and write_scope(FREE, None) is None
    with pytest.raises(Forbidden, match="pinned to scope 'work'"):
        read_scope(PINNED, "home")
    with pytest.raises(Forbidden, match="omit scope or pass 'work'"):
        write_scope(PINNED, "home")


def test_recall_lists_archived_memories_only_when_asked() -> None:
    assert shown("live", None, WORK, include_archived=False)
    assert not shown("archived", None, None, include_archived=False)
    assert shown("archived", "work", WORK, include_archived=True)
    assert not shown("live", "home", WORK, include_archived=True)
