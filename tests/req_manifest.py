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


_NONE = Deferred(None)

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
    "life:delete": _NONE,
    "life:import": _NONE,
    "life:export": _NONE,
    # §6 lifecycle
    "life:lexical": _NONE,
    "life:decay": _NONE,
    "life:cited": _NONE,
    "life:archive": _NONE,
    "life:rank-floors": _NONE,
    "life:retrieval-log": _NONE,
    # §7 settings
    "settings:layers": _NONE,
    "settings:strict": _NONE,
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
    # §10 the gateway
    "gw:signin": _NONE,
    "gw:oauth": _NONE,
    "gw:pat": None,
    "gw:route": None,
    "gw:spawn": None,
    "gw:503": None,
    "gw:isolation": None,
    "gw:rest": _NONE,
    "gw:ops": None,
    "gw:migrations": None,
    # §12 running it
    "run:two-commands": None,
    "run:docker": _NONE,
    "run:cli": None,
    "run:config": None,
    # §13 performance and quality (benchmarks; tests check the bench commands run)
    "perf:context-small": None,
    "perf:context-large": None,
    "perf:write": None,
    "perf:gateway": None,
    "perf:cold-start": None,
    "perf:rebuild": _NONE,
    "perf:memory": None,
    "quality:locomo": None,
    "quality:honest-miss": None,
    # §14 reliability and security
    "rel:kill": _NONE,
    "rel:concurrency": _NONE,
    "rel:fuzz": _NONE,
    "rel:load": _NONE,
    "sec:authz": _NONE,
}
