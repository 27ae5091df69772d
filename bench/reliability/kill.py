"""``rel:kill``: SIGKILL at a random moment during mixed writes, then check every acknowledged write.

Three ways to die, each over many trials on one workspace (so every trial also re-checks what the
earlier ones wrote):

- ``engine``: a lone engine on its socket is killed; the disk is checked at once (nothing restarted
  yet), then the engine is started again and every write is checked through the tools;
- ``gateway-engine``: the workspace's engine is killed under a running gateway, which restarts it
  while the writers carry on;
- ``gateway``: the gateway itself is killed; its engines notice and exit, it is started again on the
  same data, and everything is checked through the new gateway.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from bench.reliability.check import check_disk, check_tools
from bench.reliability.procs import GatewayRun, LoneEngine, wait_gone
from bench.reliability.workload import Journal, Writer, run_writers

GATEWAY_SETTINGS = {"restart_backoff_initial": "0.05", "crash_loop_threshold": "100000"}


@dataclass
class Outcome:
    """What a harness did and found; ``problems`` empty means nothing was lost or duplicated."""

    name: str
    trials: int = 0
    kills: int = 0
    journal: Journal = field(default_factory=Journal)
    problems: list[str] = field(default_factory=list)

    def row(self) -> dict[str, str]:
        j = self.journal
        return {
            "harness": self.name,
            "trials": str(self.trials),
            "kills": str(self.kills),
            "calls": str(j.calls),
            "acknowledged writes": str(j.acked),
            "unanswered": str(len(j.unsure_new) + sum(m.unsure is not None for m in j.memories.values())),
            "lost or duplicated": str(len(self.problems)),
        }


async def writes_flowing(journal: Journal, count: int = 3, timeout: float = 120.0) -> None:
    """Until ``count`` more writes were acknowledged, so a kill lands in the middle of the stream
    (on a busy host the clients may take a while to connect)."""
    target = journal.acked + count
    with anyio.fail_after(timeout):
        while journal.acked < target:
            await anyio.sleep(0.01)


def _writers(journal: Journal, count: int, rng: random.Random) -> list[Writer]:
    return [Writer(f"w{i}", journal, random.Random(rng.getrandbits(64))) for i in range(count)]


async def kill_lone_engine(root: Path, trials: int, rng: random.Random, *, writers: int = 3) -> Outcome:
    out = Outcome("kill -9 engine")
    engine = LoneEngine(root)
    try:
        return await _lone_engine_trials(engine, out, trials, rng, writers)
    finally:
        engine.close()


async def _lone_engine_trials(
    engine: LoneEngine, out: Outcome, trials: int, rng: random.Random, writers: int
) -> Outcome:
    engine.start()
    ws = _writers(out.journal, writers, rng)
    for _ in range(trials):
        killed = anyio.Event()

        async def killer(killed: anyio.Event = killed) -> None:
            await writes_flowing(out.journal)
            await anyio.sleep(rng.uniform(0.0, 0.5))
            engine.kill()
            killed.set()

        await run_writers(ws, lambda _name: engine.connect, killed.is_set, during=killer)
        out.trials, out.kills = out.trials + 1, out.kills + 1
        out.problems += [
            f"after kill (disk): {p}" for p in check_disk(engine.workspace, out.journal, after_crash=True)
        ]
        engine.start()
        async with engine.connect() as client:
            found = await check_tools(client, out.journal)
        out.problems += [f"after restart (tools): {p}" for p in found]
    if engine.stop() != 0:
        out.problems.append("the engine did not exit 0 on SIGTERM")
    out.problems += [f"at the end (disk): {p}" for p in check_disk(engine.workspace, out.journal)]
    return out


async def kill_engine_under_gateway(
    root: Path, trials: int, rng: random.Random, *, writers: int = 3
) -> Outcome:
    out = Outcome("kill -9 engine under the gateway")
    gw = GatewayRun(root, dict(GATEWAY_SETTINGS))
    (token,) = gw.seed(1, "kill")
    gw.start()
    ws = _writers(out.journal, writers, rng)
    try:
        for _ in range(trials):
            done = anyio.Event()

            async def killer(done: anyio.Event = done) -> None:
                await writes_flowing(out.journal)
                await anyio.sleep(rng.uniform(0.0, 0.5))
                pid = gw.kill_engine(token)
                await anyio.to_thread.run_sync(lambda: gw.wait_engine(token, other_than=pid))
                await writes_flowing(out.journal)  # the writers carry on against the restarted engine
                done.set()

            await run_writers(ws, lambda _name: lambda: gw.connect(token), done.is_set, during=killer)
            out.trials, out.kills = out.trials + 1, out.kills + 1
            async with gw.connect(token) as client:
                found = await check_tools(client, out.journal)
            out.problems += [f"tools: {p}" for p in found]
            out.problems += [f"disk: {p}" for p in check_disk(gw.workspace(token), out.journal)]
    finally:
        code = gw.stop()
    if code != 0:
        out.problems.append(f"the gateway exited {code} on SIGTERM")
    out.problems += [f"at the end (disk): {p}" for p in check_disk(gw.workspace(token), out.journal)]
    return out


async def kill_gateway(root: Path, trials: int, rng: random.Random, *, writers: int = 3) -> Outcome:
    out = Outcome("kill -9 gateway")
    gw = GatewayRun(root, dict(GATEWAY_SETTINGS))
    (token,) = gw.seed(1, "kill")
    gw.start()
    ws = _writers(out.journal, writers, rng)
    try:
        for _ in range(trials):
            killed = anyio.Event()

            async def killer(killed: anyio.Event = killed) -> None:
                await writes_flowing(out.journal)
                await anyio.sleep(rng.uniform(0.0, 0.5))
                orphans = gw.kill()
                killed.set()
                await anyio.to_thread.run_sync(lambda: wait_gone(orphans))

            await run_writers(ws, lambda _name: lambda: gw.connect(token), killed.is_set, during=killer)
            out.trials, out.kills = out.trials + 1, out.kills + 1
            out.problems += [
                f"after kill (disk): {p}"
                for p in check_disk(gw.workspace(token), out.journal, after_crash=True)
            ]
            gw.start()
            async with gw.connect(token) as client:
                found = await check_tools(client, out.journal)
            out.problems += [f"after restart (tools): {p}" for p in found]
    finally:
        code = gw.stop()
    if code != 0:
        out.problems.append(f"the gateway exited {code} on SIGTERM")
    return out
