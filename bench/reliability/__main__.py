"""``python -m bench.reliability``: the long versions of the reliability harnesses.

    python -m bench.reliability [--kill-trials 40] [--clients 50] [--workspaces 10] [--seconds 60]
                                [--race 10x20] [--only kill,concurrency,load,cold] [--seed N]

Runs, against real processes in a temporary directory: kill -9 of a lone engine, of an engine under
the gateway, and of the gateway itself, during mixed writes (``rel:kill``); many writers on one
workspace and a supersede race (``rel:concurrency``); a loopback load run with workspaces sleeping
and waking (``rel:load``); a burst of cold starts (``bench.reliability.cold``). Prints Markdown
tables of what was done and found; exits 1 if any acknowledged write was lost or duplicated, or an
unintended error was seen.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import anyio

from bench.reliability import cold, concurrency, kill, load


def table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    heads = list(rows[0])
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(r.get(h, "") for h in heads) + " |" for r in rows]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="alm-rel-"))
    only = set(args.only.split(","))
    failed = False
    if "kill" in only:
        outcomes = [
            await kill.kill_lone_engine(root / "k1", args.kill_trials, rng),
            await kill.kill_engine_under_gateway(root / "k2", args.kill_trials, rng),
            await kill.kill_gateway(root / "k3", max(1, args.kill_trials // 2), rng),
        ]
        print("### rel:kill\n\n" + table([o.row() for o in outcomes]) + "\n")
        failed |= report_problems(outcomes)
    if "concurrency" in only:
        clients, steps = (int(x) for x in args.race.split("x"))
        outcomes = [
            await concurrency.many_writers(root / "c1", args.clients, args.writes, rng),
            await concurrency.supersede_race(root / "c2", clients, steps, rng),
        ]
        print("### rel:concurrency\n\n" + table([o.row() for o in outcomes]) + "\n")
        failed |= report_problems(outcomes)
    if "load" in only:
        result = await load.run_load(root / "l", args.clients, args.workspaces, args.seconds, rng)
        print("### rel:load\n\n" + table([result.row()]) + "\n")
        failed |= bool(result.problems) or result.unintended > 0
        for problem in result.problems[:20]:
            print(f"- {problem}")
    if "cold" in only:
        burst = await cold.burst(root / "b", args.cold)
        print("### cold-start burst\n\n" + table([burst.row()]) + "\n")
        failed |= burst.failed > 0
    print(f"(seed {args.seed}; files under {root})")
    return 1 if failed else 0


def report_problems(outcomes: list[kill.Outcome]) -> bool:
    found = False
    for o in outcomes:
        for problem in o.problems[:20]:
            print(f"- {o.name}: {problem}")
            found = True
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kill-trials", type=int, default=40, help="kill -9 trials per target")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (concurrency, load)")
    parser.add_argument("--writes", type=int, default=30, help="writes per client (concurrency)")
    parser.add_argument("--race", default="10x20", help="supersede race: CLIENTSxSTEPS")
    parser.add_argument("--workspaces", type=int, default=10, help="workspaces (load)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load run")
    parser.add_argument("--cold", type=int, default=30, help="workspaces in the cold-start burst")
    parser.add_argument("--only", default="kill,concurrency,load,cold", help="which harnesses to run")
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    return anyio.run(run, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
