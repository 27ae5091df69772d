"""Signing the calls one node forwards to another (``run:scale-out``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cluster import signing
from gateway.cluster.replay import ReplayCache
from gateway.control.records import Principal

SECRET = "s" * 40
NOW = 1_900_000_000.0
WHO = Principal("own_1", "ws_1", "con_1", "Ada's laptop ✓", read_only=True, scope="project-x")


def _signed(**changes: object) -> signing.Signed:
    args: dict[str, object] = {
        "method": "POST",
        "path": "/internal/v1/mcp",
        "principal": WHO,
        "target": "node-c",
        "body": b'{"jsonrpc":"2.0"}',
        "now": NOW,
    }
    args.update(changes)
    return signing.sign(SECRET, **args)  # type: ignore[arg-type]


def _verify(signed: signing.Signed | None, **changes: object) -> Principal:
    args: dict[str, object] = {
        "method": "POST",
        "path": "/internal/v1/mcp",
        "principal_header": signed.principal if signed else None,
        "signature_header": signed.signature if signed else None,
        "here": "node-c",
        "body": b'{"jsonrpc":"2.0"}',
        "now": NOW + 1,
    }
    args.update(changes)
    args.setdefault("replay", ReplayCache(signing.WINDOW_S))
    secret = str(args.pop("secret", SECRET))
    return signing.verify(secret, **args)  # type: ignore[arg-type]


@pytest.mark.req("run:scale-out")
def test_a_signed_call_carries_the_principal_the_edge_resolved() -> None:
    assert _verify(_signed()) == WHO


@pytest.mark.req("run:scale-out")
@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"secret": "t" * 40}, "does not match"),
        ({"method": "DELETE"}, "does not match"),
        ({"path": "/internal/v1/other"}, "does not match"),
        ({"here": "node-b"}, "does not match"),
        ({"body": b'{"jsonrpc":"2.0","x":1}'}, "does not match"),
        ({"now": NOW + signing.WINDOW_S + 1}, "stale"),
        ({"now": NOW - signing.WINDOW_S - 1}, "stale"),
        ({"signature_header": None}, "not signed"),
        ({"principal_header": None}, "not signed"),
        ({"signature_header": "Bearer abc"}, "malformed"),
        ({"signature_header": "v2 t=soon n=" + "a" * 22 + " sig=00"}, "not a number"),
        ({"signature_header": "v2 t=1 n=short sig=00"}, "nonce"),
        ({"signature_header": "v1 t=1 sig=00"}, "malformed"),
        ({"principal_header": "!!!"}, "not readable"),
    ],
)
def test_anything_unsigned_stale_or_altered_is_refused(change: dict[str, object], why: str) -> None:
    with pytest.raises(signing.SignatureInvalid, match=why):
        _verify(_signed(), **change)


@pytest.mark.req("run:scale-out")
def test_the_principal_cannot_be_swapped_under_a_valid_signature() -> None:
    other = signing.encode_principal(Principal("own_2", "ws_2", "con_2", "Eve", read_only=False, scope=None))
    signed = _signed()
    with pytest.raises(signing.SignatureInvalid, match="does not match"):
        _verify(signing.Signed(other, signed.signature))


@given(
    connection_name=st.text(max_size=40),
    read_only=st.booleans(),
    scope=st.none() | st.text(min_size=1, max_size=20),
    resource=st.none() | st.text(max_size=30),
    reads_unscoped=st.booleans(),
)
def test_every_principal_survives_the_trip(
    connection_name: str, read_only: bool, scope: str | None, resource: str | None, reads_unscoped: bool
) -> None:
    who = Principal(
        "o",
        "w",
        "c",
        connection_name,
        read_only=read_only,
        scope=scope,
        resource=resource,
        reads_unscoped=reads_unscoped,
    )
    assert _verify(_signed(principal=who)) == who


@pytest.mark.req("run:scale-out")
def test_a_signed_call_is_accepted_once() -> None:
    """The nonce is remembered: the same signed call again within the window is a replay; the same
    call signed anew (another nonce) is served."""
    seen = ReplayCache(signing.WINDOW_S)
    signed = _signed()
    assert _verify(signed, replay=seen) == WHO
    with pytest.raises(signing.SignatureReplayed, match="already received"):
        _verify(signed, replay=seen, now=NOW + 20)
    assert _verify(_signed(), replay=seen) == WHO
    assert len(seen) == 2


@pytest.mark.req("run:scale-out")
def test_the_nonce_is_inside_the_signed_material() -> None:
    """Another nonce under the same signature does not match: a replay cannot dodge the cache."""
    signed = _signed(nonce="a" * 22)
    other = signed.signature.replace("n=" + "a" * 22, "n=" + "b" * 22)
    with pytest.raises(signing.SignatureInvalid, match="does not match"):
        _verify(signing.Signed(signed.principal, other))


@pytest.mark.req("run:scale-out")
def test_a_call_refused_for_its_signature_leaves_no_nonce_behind() -> None:
    """Only a call whose signature holds is remembered: nobody without the secret fills the cache."""
    seen = ReplayCache(signing.WINDOW_S)
    with pytest.raises(signing.SignatureInvalid, match="does not match"):
        _verify(_signed(), replay=seen, secret="t" * 40)
    assert len(seen) == 0
