"""A burst of cold starts: ``count`` sleeping workspaces all called at the same moment.

Every workspace has been used once and the gateway restarted, so each call must start its engine
(the warm spare takes one; the rest are spawned). With the shared embedder off, each engine loads
its own local model, which is the heaviest start there is. Every call must succeed: a 503 here
means the gateway gave up on an engine that was starting or running.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from bench.gateway import percentile
from bench.reliability.procs import GatewayRun
from bench.reliability.workload import error_kind


@dataclass
class Burst:
    count: int
    seconds: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def row(self) -> dict[str, str]:
        ms = self.seconds or [float("nan")]
        return {
            "cold starts at once": str(self.count),
            "succeeded": str(len(self.seconds)),
            "first call p50 / max s": f"{percentile(ms, 0.5):.1f} / {max(ms):.1f}",
            "errors": ", ".join(f"{k}: {n}" for k, n in sorted(self.errors.items())) or "none",
        }


async def burst(root: Path, count: int, *, settings: dict[str, str] | None = None) -> Burst:
    out = Burst(count)
    gw = GatewayRun(root, {"engine_start_timeout": "120", **(settings or {})})
    tokens = gw.seed(count, "cold")
    gw.start()
    try:

        async def call(token: str) -> None:
            began = time.monotonic()
            try:
                async with gw.connect(token) as client:
                    result = await client.call_tool("remember", {"statement": "a cold start wrote this"})
                if result.is_error:
                    out.errors["refused"] += 1
                    return
                out.seconds.append(time.monotonic() - began)
            except Exception as exc:
                out.errors[error_kind(exc)] += 1

        async with anyio.create_task_group() as tg:
            for token in tokens:
                tg.start_soon(call, token)
    finally:
        if gw.stop() != 0:
            out.errors["gateway exit status"] += 1
    return out
