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


_ISSUE3 = Deferred(3)
_ISSUE4 = Deferred(4)
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
    "store:hand-edits": _ISSUE3,
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
    "recall:get-context": _ISSUE3,
    "recall:fresh-facts": _ISSUE3,
    "recall:budget-order": _ISSUE3,
    "recall:honest-miss": _ISSUE3,
    "recall:graph": _ISSUE3,
    "recall:scope": _ISSUE3,
    "recall:retrieve-memory": None,
    "recall:status": _ISSUE3,
    "recall:query-safe": _ISSUE3,
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
    "embed:local": _ISSUE3,
    "embed:vertex": _ISSUE3,
    "embed:off": _ISSUE3,
    "embed:model-id": _ISSUE3,
    "embed:background": _ISSUE3,
    "embed:states": _ISSUE3,
    # §9 the engine process
    "engine:mcp": None,
    "engine:identity": None,
    "engine:index": _ISSUE3,
    "engine:rebuild": _ISSUE3,
    "engine:idle": _ISSUE4,
    # §10 the gateway
    "gw:signin": _NONE,
    "gw:oauth": _NONE,
    "gw:pat": _ISSUE4,
    "gw:route": _ISSUE4,
    "gw:spawn": _ISSUE4,
    "gw:503": _ISSUE4,
    "gw:isolation": _ISSUE4,
    "gw:rest": _NONE,
    "gw:ops": _ISSUE4,
    "gw:migrations": _ISSUE4,
    # §12 running it
    "run:two-commands": _ISSUE4,
    "run:docker": _NONE,
    "run:cli": _ISSUE4,
    "run:config": _ISSUE4,
    # §13 performance and quality (benchmarks; tests check the bench commands run)
    "perf:context-small": _ISSUE3,
    "perf:context-large": _ISSUE3,
    "perf:write": _ISSUE3,
    "perf:gateway": _ISSUE4,
    "perf:cold-start": _ISSUE4,
    "perf:rebuild": _NONE,
    "perf:memory": _ISSUE4,
    "quality:locomo": _ISSUE3,
    "quality:honest-miss": _ISSUE3,
    # §14 reliability and security
    "rel:kill": _NONE,
    "rel:concurrency": _NONE,
    "rel:fuzz": _NONE,
    "rel:load": _NONE,
    "sec:authz": _NONE,
}
