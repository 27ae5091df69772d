"""An engine process keeps numpy's BLAS to one thread (engine/cores.py); searches give the same answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from engine.index.vectors import VectorMatrix

_REPORT = (
    "import json, sys; from threadpoolctl import threadpool_info; from engine import server; "
    "code = server.main(sys.argv[1:]); "
    "print(json.dumps([code, [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']]))"
)


def test_the_engine_process_runs_blas_on_one_thread(tmp_path: Path) -> None:
    # --doctor on a folder that is not a workspace stops early (usage error), after the set-up
    args = ["--doctor", "--dir", str(tmp_path / "not-a-workspace")]
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, *args], capture_output=True, text=True, timeout=120, check=True
    )
    code, threads = json.loads(done.stdout.strip().splitlines()[-1])
    assert code != 0
    assert threads, "numpy's BLAS library was not found"
    assert set(threads) == {1}


def test_one_blas_thread_reports_what_it_changed() -> None:
    script = (
        "import json; from engine.cores import one_blas_thread; from threadpoolctl import threadpool_info; "
        "before = one_blas_thread(); blas = [i for i in threadpool_info() if i['user_api'] == 'blas']; "
        "print(json.dumps([before, [i['num_threads'] for i in blas]]))"
    )
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    before, after = json.loads(done.stdout)
    assert before and all(n >= 1 for n in before.values())
    assert after == [1] * len(after) and len(after) == len(before)


def test_nearest_vectors_are_the_same_on_one_blas_thread_as_on_many() -> None:
    rng = np.random.default_rng(5)
    matrix = VectorMatrix(384)
    matrix.load((i, rng.standard_normal(384).astype("<f4").tobytes()) for i in range(3000))
    queries = rng.standard_normal((20, 384)).astype(np.float32)
    threads = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    with threadpool_limits(limits=max(threads, 2), user_api="blas"):
        many = [matrix.knn(q, 100) for q in queries]
    with threadpool_limits(limits=1, user_api="blas"):
        one = [matrix.knn(q, 100) for q in queries]
    assert one == many
