"""The project's copy of the specification's requirement IDs (``../shared/SPEC.md``).

Every ID maps to ``None`` when it is in force (at least one test must cite it with
``@pytest.mark.req("…")``), or to a :class:`Deferred` naming the open issue that will
build it (``issue=None`` when no issue asks for it yet). ``tests/test_req_manifest.py``
enforces both directions: an ID in force with no test fails, and a test citing an
unknown ID fails.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deferred:
    issue: int | None


REQUIREMENTS: dict[str, Deferred | None] = {
    # §2 the store
    "store:layout": None,
    "store:ledger:append-only": None,
    "store:note:format": None,
    "store:directory-authority": None,
    "store:durable": None,
    "store:torn-tail": None,
    "store:bad-file": None,
    "store:hand-edits": None,
    "store:round-trip": None,
    # §3 writing
    "write:remember": None,
    "write:save-memory": None,
    "write:remember-note": None,
    "write:receipt": None,
    "write:idempotent": None,
    "write:supersede": None,
    "write:possible-duplicates": None,
    "write:source": None,
    "write:scope": None,
    "write:no-queue": None,
    # §4 reading
    "recall:get-context": None,
    "recall:fresh-facts": None,
    "recall:budget-order": None,
    "recall:honest-miss": None,
    "recall:graph": None,
    "recall:scope": None,
    "recall:retrieve-memory": None,
    "recall:status": None,
    "recall:query-safe": None,
    # §5 retire, restore, delete, import, export
    "life:retire": None,
    "life:delete": None,
    "life:import": None,
    "life:export": None,
    # §6 lifecycle
    "life:lexical": None,
    "life:decay": None,
    "life:cited": None,
    "life:archive": None,
    "life:rank-floors": None,
    "life:retrieval-log": None,
    # §7 settings
    "settings:layers": None,
    "settings:strict": None,
    # §8 embeddings
    "embed:local": None,
    "embed:vertex": None,
    "embed:off": None,
    "embed:model-id": None,
    "embed:background": None,
    "embed:states": None,
    # §9 the engine process
    "engine:mcp": None,
    "engine:identity": None,
    "engine:index": None,
    "engine:rebuild": None,
    "engine:idle": None,
    "engine:surface": None,
    # §10 the gateway
    "gw:signin": None,
    "gw:oauth": None,
    "gw:pat": None,
    "gw:route": None,
    "gw:spawn": None,
    "gw:503": None,
    "gw:isolation": None,
    "gw:rest": None,
    "gw:ops": None,
    "gw:migrations": None,
    # §12 running it
    "run:two-commands": None,
    "run:docker": None,
    "run:cli": None,
    "run:config": None,
    "run:scale-out": None,
    # §13 performance and quality (benchmarks; tests check the bench commands run)
    "perf:context-small": None,
    "perf:context-large": None,
    "perf:write": None,
    "perf:gateway": None,
    "perf:cold-start": None,
    "perf:rebuild": None,
    "perf:memory": None,
    "quality:locomo": None,
    "quality:honest-miss": None,
    "quality:layouts": None,
    # §14 reliability and security
    "rel:kill": None,
    "rel:concurrency": None,
    "rel:fuzz": None,
    "rel:load": None,
    "sec:authz": None,
    # §15 host integration
    "host:turn-loop": None,
}
