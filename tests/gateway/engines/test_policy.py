"""Pure supervisor decisions (gw:spawn, gw:503)."""

from __future__ import annotations

import pytest

from gateway.engines.policy import (
    RestartPolicy,
    SlotView,
    backoff_delay,
    capacity_victim,
    idle_victims,
    start_gate,
)

P = RestartPolicy(backoff_initial=0.5, backoff_max=4.0, crash_loop_threshold=3, crash_loop_window=60.0)


@pytest.mark.req("gw:spawn")
def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_delay(P, n) for n in range(6)] == [0.0, 0.5, 1.0, 2.0, 4.0, 4.0]


@pytest.mark.req("gw:spawn", "gw:503")
def test_start_gate() -> None:
    assert start_gate(P, (), 100.0).verdict == "open"
    assert start_gate(P, (99.9,), 100.0) == start_gate(P, (99.9,), 100.0)
    gate = start_gate(P, (99.9,), 100.0)
    assert gate.verdict == "wait" and gate.delay == pytest.approx(0.4)
    assert start_gate(P, (99.0,), 100.0).verdict == "open"
    loop = start_gate(P, (50.0, 90.0, 99.0), 100.0)
    assert loop.verdict == "crash_loop" and loop.delay == pytest.approx(10.0)
    assert start_gate(P, (30.0, 90.0, 99.0), 100.0).verdict != "crash_loop"  # the oldest has aged out


@pytest.mark.req("engine:idle")
def test_idle_victims_have_nothing_in_flight() -> None:
    slots = [
        SlotView("a", running=True, in_flight=0, last_used=0.0),
        SlotView("b", running=True, in_flight=1, last_used=0.0),
        SlotView("c", running=True, in_flight=0, last_used=95.0),
        SlotView("d", running=False, in_flight=0, last_used=0.0),
    ]
    assert idle_victims(slots, 100.0, 10.0) == ["a"]


@pytest.mark.req("gw:spawn", "gw:503")
def test_capacity_stops_the_least_recently_used_idle_engine_or_refuses() -> None:
    a = SlotView("a", running=True, in_flight=0, last_used=5.0)
    b = SlotView("b", running=True, in_flight=0, last_used=1.0)
    busy = SlotView("c", running=True, in_flight=2, last_used=0.0)
    assert capacity_victim([a], 2) == (True, None)
    assert capacity_victim([a, b, busy], 3) == (True, "b")
    assert capacity_victim([busy], 1) == (False, None)
