"""Run ``almanac`` commands as a user whom file permissions bind (tests of unusable paths).

``python -m tests.gateway.cli.unprivileged`` reads a JSON list of jobs (``{"argv": [...], "env":
{...}}``) on stdin and answers a JSON list of ``{"code", "stdout", "stderr"}``: each command runs in
its own process, forked after the CLI is imported once (the console script's import is most of a
command's cost), with its own environment, stdin on /dev/null and its own exit status; an exception
that escapes prints its traceback and exits 1, as the ``almanac`` console script does.

:func:`run_unprivileged` starts that driver as the user the tests run as when it is not root; as
root, it starts it with every capability dropped (``setpriv --bounding-set=-all``), so the kernel
checks file permissions for it exactly as for any unprivileged user — no ``CAP_DAC_OVERRIDE``,
no ``CAP_DAC_READ_SEARCH``, no ``CAP_FOWNER``. (It stays uid 0 rather than becoming ``nobody``
because the virtualenv's interpreter may live where another user cannot reach it, as under
``/root/.pyenv``.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: How long one command may take before it is killed (a refusal is immediate; a hang is a bug).
COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def unprivileged_prefix() -> list[str] | None:
    """The command prefix that drops privileges (empty when there are none), or None when it cannot."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all"]


def run_unprivileged(jobs: list[tuple[list[str], dict[str, str]]], cwd: Path) -> list[Outcome]:
    """Each ``(argv, env)`` as ``almanac *argv`` with exactly ``env``, without privileges."""
    prefix = unprivileged_prefix()
    assert prefix is not None, "needs setpriv (util-linux) to drop root's capabilities"
    payload = json.dumps([{"argv": argv, "env": env} for argv, env in jobs])
    # the driver is this checkout's ``tests.gateway.cli.unprivileged``, run from a scratch folder
    checkout = str(Path(__file__).resolve().parents[3])
    inherited = os.environ.get("PYTHONPATH", "")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(p for p in (checkout, inherited) if p),
    }
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "tests.gateway.cli.unprivileged"],
        input=payload,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S * (len(jobs) + 1),
        cwd=cwd,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return [Outcome(**found) for found in json.loads(done.stdout)]


def _status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _child(argv: list[str], env: dict[str, str], out: int, err: int) -> None:  # pragma: no cover - child
    from gateway.cli import main

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.environ.clear()
    os.environ.update(env)
    code = 1
    try:
        main.main(argv, prog_name="almanac")
        code = 0
    except SystemExit as exc:
        code = _status(exc)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _one(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            _child(argv, env, out.fileno(), err.fileno())
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise AssertionError(f"almanac {' '.join(argv)} did not finish in {COMMAND_TIMEOUT_S} s")
            time.sleep(0.01)
        out.seek(0)
        err.seek(0)
        return {
            "code": os.waitstatus_to_exitcode(status),
            "stdout": out.read().decode("utf-8", "replace"),
            "stderr": err.read().decode("utf-8", "replace"),
        }


def main() -> None:
    import gateway.cli  # noqa: F401 - imported once, before the forks

    jobs = json.load(sys.stdin)
    results = [_one(job["argv"], job["env"]) for job in jobs]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
