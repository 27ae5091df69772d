"""Pure supervisor decisions: restart backoff, crash loops, which engines to stop (``gw:spawn``).

Times are plain floats from a monotonic clock; nothing here sleeps, spawns or reads the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class RestartPolicy:
    backoff_initial: float
    backoff_max: float
    crash_loop_threshold: int
    crash_loop_window: float


@dataclass(frozen=True)
class Gate:
    """Whether an engine may start now: ``open``; ``wait`` ``delay`` seconds (backoff); or
    ``crash_loop`` (refuse until ``delay`` seconds have passed)."""

    verdict: Literal["open", "wait", "crash_loop"]
    delay: float = 0.0


@dataclass(frozen=True)
class SlotView:
    """What the policy needs to know about one workspace's engine."""

    workspace_id: str
    running: bool
    in_flight: int
    last_used: float


def recent(failures: tuple[float, ...], now: float, window: float) -> tuple[float, ...]:
    """The failures (start failures and crashes) inside the crash-loop window."""
    return tuple(t for t in failures if now - t < window)


def backoff_delay(policy: RestartPolicy, failures: int) -> float:
    """Delay before the next start after ``failures`` recent failures: 0, then initial × 2ⁿ⁻¹, capped."""
    if failures <= 0:
        return 0.0
    return float(min(policy.backoff_max, policy.backoff_initial * 2 ** (failures - 1)))


def start_gate(policy: RestartPolicy, failures: tuple[float, ...], now: float) -> Gate:
    window = recent(failures, now, policy.crash_loop_window)
    if len(window) >= policy.crash_loop_threshold:
        # Open again once enough of the recent failures have aged out of the window.
        oldest_that_matters = sorted(window)[len(window) - policy.crash_loop_threshold]
        return Gate("crash_loop", max(0.0, oldest_that_matters + policy.crash_loop_window - now))
    if not window:
        return Gate("open")
    ready_at = max(window) + backoff_delay(policy, len(window))
    if ready_at <= now:
        return Gate("open")
    return Gate("wait", ready_at - now)


def idle_victims(slots: list[SlotView], now: float, idle_timeout: float) -> list[str]:
    """Running engines with nothing in flight and unused for at least ``idle_timeout``."""
    return [
        s.workspace_id for s in slots if s.running and s.in_flight == 0 and now - s.last_used >= idle_timeout
    ]


def capacity_victim(slots: list[SlotView], cap: int) -> tuple[bool, str | None]:
    """Room for one more engine? Returns ``(ok, victim)``: ``(True, None)`` when under the cap,
    ``(True, id)`` when the least recently used idle engine must stop first, ``(False, None)`` when
    every running engine is busy."""
    running = [s for s in slots if s.running]
    if len(running) < cap:
        return True, None
    idle = sorted((s for s in running if s.in_flight == 0), key=lambda s: s.last_used)
    if not idle:
        return False, None
    return True, idle[0].workspace_id
