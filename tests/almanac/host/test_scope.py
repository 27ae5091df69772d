"""Session / agent / turn scope layers for deliberate loads and saves, against a real local engine
(host:turn-loop)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from almanac.host import AlmanacProvider, AlmanacUnavailable, HostSettings, MemoryProvider, Scope
from almanac.host.scope import in_view

pytestmark = pytest.mark.req("host:turn-loop")

ON = HostSettings(enabled=True, auto_save=False, load_timeout=20, top_k=50)
QUERY = "Fjord notes"
SAVED = {
    None: "Fjord notes: the user edits in Helix.",
    Scope.session("s1"): "Fjord notes: session one covers the migration.",
    Scope.session("s2"): "Fjord notes: session two covers the invoices.",
    Scope.agent("reviewer"): "Fjord notes: the reviewer agent checks style.",
    Scope.turn("s1.t4"): "Fjord notes: turn four asked about backups.",
}


def scopes_on_disk(ws: Path) -> dict[str, str | None]:
    found = {}
    for path in (ws / "notes").rglob("*.md"):
        _, head, body = path.read_text(encoding="utf-8").split("---\n", 2)
        found[body.strip()] = yaml.safe_load(head).get("scope")
    return found


def shown(block: str) -> set[Scope | None]:
    return {scope for scope, text in SAVED.items() if f"- {text}\n" in block}


@pytest.mark.anyio
async def test_a_scoped_load_sees_its_layer_and_the_user_layer_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    provider = AlmanacProvider.folder(str(ws), args=("--embedding-provider", "off"))
    async with MemoryProvider(provider, ON) as memory:
        for scope, text in SAVED.items():
            assert await memory.remember(text, scope=scope)
        session = await memory.load(QUERY, scope=Scope.session("s1"))
        agent = await memory.load(QUERY, scope=Scope.agent("reviewer"))
        turn = await memory.load(QUERY, scope=Scope.turn("s1.t4"))
        automatic = await memory.before_turn(QUERY)
    assert shown(session) == {None, Scope.session("s1")}
    assert shown(agent) == {None, Scope.agent("reviewer")}
    assert shown(turn) == {None, Scope.turn("s1.t4")}
    # the automatic path is the user layer: no session's, agent's or turn's memory reaches it
    assert shown(automatic) == {None}
    on_disk = scopes_on_disk(ws)
    assert on_disk[SAVED[None]] is None and on_disk[SAVED[Scope.session("s1")]] == "session:s1"
    assert on_disk[SAVED[Scope.agent("reviewer")]] == "agent:reviewer"


def test_a_scope_the_store_could_not_hold_is_refused_saying_what_to_use() -> None:
    with pytest.raises(ValueError, match="lowercase"):
        Scope.session("Session One")
    with pytest.raises(ValueError, match=r"without '\.\.'"):
        Scope.agent("a..b")
    with pytest.raises(ValueError, match="one of session, agent, turn"):
        Scope("user", "ada")  # type: ignore[arg-type]


def test_which_memories_a_load_sees() -> None:
    s1 = Scope.session("s1")
    assert in_view(None, None) and in_view(None, s1)
    assert in_view("session:s1", s1) and not in_view("session:s2", s1) and not in_view("session:s1", None)
    assert not in_view("agent:reviewer", s1)
    assert in_view("project:fjord", None) and in_view("project:fjord", s1)  # not a layer: Almanac's own


@pytest.mark.anyio
async def test_deliberate_calls_need_only_the_master_switch(tmp_path: Path) -> None:
    quiet = HostSettings(enabled=True, auto_load=False, auto_save=False, load_timeout=20)
    provider = AlmanacProvider.folder(str(tmp_path / "ws"), args=("--embedding-provider", "off"))
    async with MemoryProvider(provider, quiet) as memory:
        assert await memory.remember("Fjord notes: the user edits in Helix.", scope=Scope.agent("a1"))
        assert await memory.before_turn(QUERY) == ""  # autoLoad off: nothing automatic
        assert "Helix" in await memory.load(QUERY, scope=Scope.agent("a1"))


@pytest.mark.anyio
async def test_a_deliberate_save_that_does_not_land_raises(closed_port: int) -> None:
    settings = HostSettings(enabled=True, save_timeout=1)
    async with MemoryProvider(
        AlmanacProvider.service(f"http://127.0.0.1:{closed_port}/mcp", "t"), settings
    ) as memory:
        with pytest.raises(AlmanacUnavailable, match="did not land in time"):
            await memory.remember("The user prefers tabs.", scope=Scope.session("s1"))
