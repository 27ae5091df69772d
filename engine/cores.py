"""How an engine process uses the machine's cores.

An engine is one workspace's process on a host shared by many; its parallelism is explicit — the
query embedding in a worker thread beside the keyword searches (``engine.recall.context``) and
ONNX Runtime's own intra-op threads (``engine.embed.local``). numpy's BLAS (OpenBLAS) would
otherwise add a pool of its own for every matrix–vector product of the vector search
(``engine.index.vectors``): on a busy host those threads wait for a core and spin when they get
one, so one nearest-neighbour search over 1,849 vectors took 9.6 ms instead of 0.24 ms (load 13)
and slowed the query embedding beside it (bench.latency, docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any


def one_blas_thread() -> dict[str, int]:
    """Limit this process's BLAS libraries to one thread each (for good: call it once, at the
    composition root); returns each library's thread count before the call."""
    import numpy  # noqa: F401  # loads OpenBLAS, so that threadpoolctl finds it
    from threadpoolctl import threadpool_info, threadpool_limits

    before: list[dict[str, Any]] = threadpool_info()
    threadpool_limits(limits=1, user_api="blas")
    return {str(lib["filepath"]): int(lib["num_threads"]) for lib in before if lib["user_api"] == "blas"}
