"""A data directory, config file or socket folder the user cannot use: every command says so in one
line naming the path and the fix, exits 2, shows no traceback and changes nothing (run:cli,
run:two-commands).

The commands run without privileges (:mod:`tests.gateway.cli.unprivileged`): as root the tests would
otherwise read and write through any permission.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from gateway.cli import main
from gateway.cli.reference import commands
from tests.gateway.cli.unprivileged import Outcome, run_unprivileged, unprivileged_prefix

pytestmark = [
    pytest.mark.req("run:cli", "run:two-commands"),
    pytest.mark.skipif(unprivileged_prefix() is None, reason="running as root without setpriv (util-linux)"),
]

ALMANAC = str(Path(sys.executable).parent / "almanac")
EMAIL = "ada@example.com"

#: The arguments each command gets besides --data-dir: enough to get past its own checks.
ARGS: dict[tuple[str, ...], list[str]] = {
    ("audit",): [],
    ("control", "migrate-to-postgres"): ["--database-url", "postgresql://almanac@127.0.0.1:1/none"],
    ("engine", "doctor"): ["--owner", EMAIL],
    ("engine", "reindex"): ["--owner", EMAIL],
    ("export",): ["{scratch}/out.zip", "--owner", EMAIL],
    ("import",): ["{scratch}/notes", "--owner", EMAIL, "--label", "notes"],
    ("invite", "create"): [],
    ("node", "drain"): ["n1"],
    ("node", "list"): [],
    ("node", "lost"): ["n1", "--confirm"],
    ("node", "stale"): [],
    ("owner", "create"): ["bob@example.com"],
    ("owner", "erase"): [EMAIL, "--finish"],
    ("owner", "reset-link"): [EMAIL],
    ("owner", "set-password"): [EMAIL, "--password-stdin"],
    ("serve",): ["--port", "0"],
    ("token", "create"): ["--owner", EMAIL, "--name", "script"],
    ("token", "list"): ["--owner", EMAIL],
    ("token", "revoke"): ["script", "--owner", EMAIL],
    ("workspace", "create"): ["second", "--owner", EMAIL],
    ("workspace", "list"): ["--owner", EMAIL],
    ("workspace", "move"): ["default", "--owner", EMAIL, "--to", "n1"],
    ("workspace", "restore"): ["default", "--owner", EMAIL, "--abandon"],
    ("workspace", "usage"): ["--owner", EMAIL],
}


#: Commands that need the control plane in PostgreSQL and refuse before opening an SQLite one: the
#: data directory's control database is not theirs to use.
POSTGRES_ONLY = {("workspace", "move"), ("workspace", "restore")}


def _command(path: tuple[str, ...]) -> click.Command:
    found: click.Command = main
    for name in path:
        assert isinstance(found, click.Group)
        found = found.commands[name]
    return found


def test_every_command_with_a_data_directory_is_tried() -> None:
    """A new command that reads the data directory must join :data:`ARGS` (and so these tests)."""
    with_data_dir = {
        path for path in commands(main) if any(param.name == "data_dir" for param in _command(path).params)
    }
    assert with_data_dir == set(ARGS)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with an owner and a token in it, made once by the real CLI (privileged)."""
    scratch = tmp_path_factory.mktemp("made")
    (scratch / "home").mkdir()
    for args in (("owner", "create", EMAIL), ("token", "create", "--owner", EMAIL, "--name", "script")):
        done = subprocess.run(
            [ALMANAC, *args, "--data-dir", str(scratch / "data")],
            capture_output=True,
            text=True,
            timeout=60,
            env=_env(scratch),
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
    return scratch / "data"


@pytest.fixture
def place(made: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of that data directory (``place/data``), a folder of notes and a home; every
    permission is given back afterwards so that pytest can clean up."""
    shutil.copytree(made, tmp_path / "data")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("A note.\n", encoding="utf-8")
    (tmp_path / "home").mkdir()
    yield tmp_path
    for root, dirs, files in os.walk(tmp_path, topdown=True):
        os.chmod(root, 0o700)
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)


def _env(scratch: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "HOME": str(scratch / "home"),
        "ALMANAC_EMBEDDER": "false",
        **extra,
    }


def run_all(
    scratch: Path, *extra_args: str, sqlite: bool = False, **env: str
) -> dict[tuple[str, ...], Outcome]:
    """Every command of :data:`ARGS` on ``scratch/data`` (``sqlite``: those that open its control
    database), without privileges."""
    paths = [path for path in ARGS if not (sqlite and path in POSTGRES_ONLY)]
    jobs = []
    for path in paths:
        args = ARGS[path]
        argv = [*path, *(a.replace("{scratch}", str(scratch)) for a in args)]
        jobs.append(([*argv, "--data-dir", str(scratch / "data"), *extra_args], _env(scratch, **env)))
    return dict(zip(paths, run_unprivileged(jobs, cwd=scratch), strict=True))


def assert_one_line(found: dict[tuple[str, ...], Outcome], *fragments: str) -> None:
    """Each command: exit 2, and on stderr exactly one line, ``error: …`` with every fragment."""
    for path, outcome in found.items():
        said = f"almanac {' '.join(path)}: exit {outcome.code}\n{outcome.stderr}"
        assert outcome.code == 2, said
        assert "Traceback" not in outcome.stderr, said
        lines = outcome.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), said
        for fragment in fragments:
            assert fragment in lines[0], said


def digest(data: Path) -> str:
    return hashlib.sha256((data / "control.db").read_bytes()).hexdigest()


def test_a_data_directory_that_cannot_be_read(place: Path) -> None:
    data = place / "data"
    data.chmod(0o000)
    assert_one_line(run_all(place), f"the data directory {data} ", "--data-dir")
    data.chmod(0o700)


def test_a_data_directory_that_cannot_be_written(place: Path) -> None:
    data = place / "data"
    before = digest(data), sorted(os.listdir(data))
    data.chmod(0o555)
    assert_one_line(run_all(place, sqlite=True), str(data), "permissions", "--data-dir")
    data.chmod(0o700)
    assert (digest(data), sorted(os.listdir(data))) == before


def test_a_control_database_that_cannot_be_written(place: Path) -> None:
    data = place / "data"
    before = digest(data)
    (data / "control.db").chmod(0o444)
    found = run_all(place, sqlite=True)
    serve = found.pop(("serve",))  # serve proves the folder writable first; then it opens the database
    assert_one_line(found, f"cannot write {data / 'control.db'}", "permissions", "--data-dir")
    assert_one_line({("serve",): serve}, f"cannot write {data / 'control.db'}", "--data-dir")
    assert digest(data) == before


def test_a_control_database_that_cannot_be_read(place: Path) -> None:
    data = place / "data"
    (data / "control.db").chmod(0o000)
    assert_one_line(
        run_all(place, sqlite=True), f"cannot open {data / 'control.db'}", "permissions", "--data-dir"
    )


@pytest.mark.req("run:config")
def test_a_config_file_in_the_data_directory_that_cannot_be_read(place: Path) -> None:
    config = place / "data" / "almanac.toml"
    config.write_text('log_level = "info"\n', encoding="utf-8")
    config.chmod(0o000)
    before = digest(place / "data")
    assert_one_line(run_all(place), f"cannot read the config file {config} ", "--config")
    assert digest(place / "data") == before


@pytest.mark.req("run:config")
def test_a_named_config_file_that_cannot_be_read(place: Path) -> None:
    config = place / "elsewhere.toml"
    config.write_text('log_level = "info"\n', encoding="utf-8")
    config.chmod(0o000)
    assert_one_line(run_all(place, "--config", str(config)), f"the config file {config} ", "--config")
    assert_one_line(
        run_all(place, ALMANAC_CONFIG=str(config)), f"the config file {config} ", "ALMANAC_CONFIG"
    )


def test_serve_with_a_socket_folder_it_cannot_make(place: Path) -> None:
    parent = place / "sockets"
    parent.mkdir(mode=0o555)
    run_dir = parent / "run"
    job = (
        ["serve", "--port", "0", "--data-dir", str(place / "data")],
        _env(place, ALMANAC_RUNTIME_DIR=str(run_dir)),
    )
    [outcome] = run_unprivileged([job], cwd=place)
    assert_one_line({("serve",): outcome}, f"the socket folder {run_dir} ", "runtime_dir")
    assert not run_dir.exists()


def test_serve_with_a_data_directory_it_cannot_make(place: Path) -> None:
    parent = place / "locked"
    parent.mkdir(mode=0o555)
    job = (["serve", "--port", "0", "--data-dir", str(parent / "data")], _env(place))
    [outcome] = run_unprivileged([job], cwd=place)
    assert_one_line({("serve",): outcome}, f"the data directory {parent / 'data'} ", "--data-dir")
    assert not (parent / "data").exists()
