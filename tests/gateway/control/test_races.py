"""Single-use rows stay single-use when gateways race: several gateways (separate control-plane
connections to one database: the same SQLite file, or the same PostgreSQL database) spend the same
refresh token, invite code or authorization code at the same moment, and exactly one wins."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from gateway.control.records import ConsentChoice, TokenLifetimes
from gateway.control.store import ControlPlane
from gateway.errors import BadRequest, InvalidGrant, InviteInvalid, MoveUnderWay

GATEWAYS = 4
NOW = 1_900_000_000.0
LIFETIMES = TokenLifetimes(access=600, refresh=86400)
T = TypeVar("T")


@pytest.fixture
def gateways(tmp_path: Path, database_url: str | None) -> Iterator[list[ControlPlane]]:
    planes = [ControlPlane.connect(database_url, tmp_path / "control.db") for _ in range(GATEWAYS)]
    yield planes
    for plane in planes:
        plane.close()


def _all_at_once(planes: list[ControlPlane], act: Callable[[int, ControlPlane], T]) -> list[T | Exception]:
    """Run ``act`` on every gateway in its own thread, released together; each result or error."""
    barrier = threading.Barrier(len(planes))
    results: list[T | Exception] = [RuntimeError("did not finish")] * len(planes)

    def run(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            results[i] = act(i, planes[i])
        except Exception as exc:  # collected and checked by the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(planes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def _code(store: ControlPlane) -> tuple[str, str]:
    owner, workspace = store.owners.create("race@example.com", None)
    store.oauth.save_client(
        "dcr_c", "dcr", {"redirect_uris": ["http://127.0.0.1/cb"]}, now=NOW, expires_at=None
    )
    code = store.oauth.save_code(
        client_id="dcr_c",
        choice=ConsentChoice(owner.id, workspace.id, "Racer", read_only=False, scope=None),
        redirect_uri="http://127.0.0.1/cb",
        redirect_explicit=True,
        code_challenge="challenge",
        resource="https://mem.example.com/mcp",
        scopes=("memory",),
        now=NOW,
        ttl=60,
        remote=None,
    )
    return owner.id, code


@pytest.mark.req("gw:oauth")
def test_a_refresh_token_spent_by_several_gateways_at_once_rotates_once(gateways: list[ControlPlane]) -> None:
    _, code = _code(gateways[0])
    first = gateways[0].oauth.exchange_code(code, now=NOW, lifetimes=LIFETIMES)
    results = _all_at_once(
        gateways, lambda _i, g: g.oauth.rotate_refresh(first.refresh_token, now=NOW + 1, lifetimes=LIFETIMES)
    )
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) == 1, results
    assert all(isinstance(e, InvalidGrant) for e in lost), lost
    # one rotation issued one new pair: the original pair plus one (a reuse may have revoked them all)
    refresh_rows = (
        gateways[0]
        ._db.execute(
            "SELECT count(*) FROM tokens WHERE connection_id = ? AND kind = 'refresh'", (first.connection_id,)
        )
        .fetchone()
    )
    assert refresh_rows is not None and int(refresh_rows[0]) == 2


@pytest.mark.req("gw:signin")
def test_an_invite_used_by_several_gateways_at_once_admits_one_owner(gateways: list[ControlPlane]) -> None:
    invite = gateways[0].accounts.create_invite("for one person")
    results = _all_at_once(
        gateways,
        lambda i, g: g.accounts.sign_up(
            f"person{i}@example.com", None, invite=invite, remote=None, method="password"
        ),
    )
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) == 1, results
    assert all(isinstance(e, InviteInvalid) for e in lost), lost
    owners = gateways[0]._db.execute("SELECT count(*) FROM owners").fetchone()
    assert owners is not None and int(owners[0]) == 1  # the losers' owners were rolled back


@pytest.mark.req("gw:oauth")
def test_a_code_exchanged_by_several_gateways_at_once_creates_one_connection(
    gateways: list[ControlPlane],
) -> None:
    owner_id, code = _code(gateways[0])
    results = _all_at_once(gateways, lambda _i, g: g.oauth.exchange_code(code, now=NOW, lifetimes=LIFETIMES))
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) <= 1 and len(won) + len(lost) == GATEWAYS, results
    assert all(isinstance(e, InvalidGrant) for e in lost), lost
    made = gateways[0].connections.of_owner(owner_id, include_revoked=True)
    assert len(made) == 1  # never two grants from one code


@pytest.mark.req("run:scale-out")
@pytest.mark.req("life:delete")
def test_an_account_erase_and_a_move_begun_at_once_never_both_go_ahead(gateways: list[ControlPlane]) -> None:
    """One gateway locks an owner out (an account erase) while another begins a move of their
    workspace, released together, round after round: one of the two is refused each time — never an
    erase running beside a move that could bring a copy back."""
    first = gateways[0]
    for name in ("node-a", "node-b"):
        first.nodes.register(name, f"http://{name}", now=NOW)
    for round_ in range(12):
        owner, workspace = first.owners.create(f"racer{round_}@example.com", None)
        first.nodes.place_on(workspace.id, "node-a", now=NOW, lease=30)

        def act(i: int, plane: ControlPlane, owner_id: str = owner.id, ws: str = workspace.id) -> object:
            if i % 2 == 0:
                return plane.erasure.lock_out_owner(owner_id, remote=None)
            return plane.moves.begin(ws, "node-a", "node-b", now=NOW, timeout=10)

        erased, moved = _all_at_once(gateways[:2], act)
        assert isinstance(erased, MoveUnderWay) != isinstance(moved, BadRequest), (erased, moved)
        assert not isinstance(erased, Exception) or isinstance(erased, MoveUnderWay), erased
        assert not isinstance(moved, Exception) or "being erased" in str(moved), moved
        placement = first.nodes.placement(workspace.id)
        assert placement is not None
        assert (placement.moving_to is None) == first.erasure.being_erased(workspace.id)
