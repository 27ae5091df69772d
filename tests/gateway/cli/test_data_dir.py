"""One data directory, found the same way by every command, never the current directory by accident."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main

OWNER = "ada@example.com"


def _run(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input="", env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME (no XDG, no ALMANAC_ variables), and a working directory elsewhere."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("XDG_DATA_HOME", "ALMANAC_DATA_DIR", "ALMANAC_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path / "home"


@pytest.mark.req("run:config", "run:cli")
def test_default_is_per_user_not_the_current_directory(home: Path, tmp_path: Path) -> None:
    code, _, err = _run("owner", "create", OWNER)
    assert code == 0, err
    assert (home / ".local" / "share" / "almanac" / "control.db").is_file()
    assert list((tmp_path / "elsewhere").iterdir()) == []
    code, out, _ = _run("workspace", "list", "--owner", OWNER)  # from anywhere: the same data
    assert code == 0 and out.split("\t")[1] == "default"
    code, _, err = _run("workspace", "list", "--owner", OWNER, env={"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert code != 0 and str(tmp_path / "xdg" / "almanac") in err


@pytest.mark.req("run:config", "run:cli")
def test_flag_then_environment_then_config_file(home: Path, tmp_path: Path) -> None:
    flag, env_dir, file_dir = tmp_path / "flag", tmp_path / "env", tmp_path / "file"
    config = tmp_path / "almanac.toml"
    config.write_text(f'data_dir = "{file_dir}"\n', encoding="utf-8")
    _run("owner", "create", OWNER, "--config", str(config))
    assert (file_dir / "control.db").is_file()
    _run("owner", "create", OWNER, "--config", str(config), env={"ALMANAC_DATA_DIR": str(env_dir)})
    assert (env_dir / "control.db").is_file()
    _run("owner", "create", OWNER, "--data-dir", str(flag), env={"ALMANAC_DATA_DIR": str(env_dir)})
    assert (flag / "control.db").is_file()
    _run("owner", "create", "bob@example.com", env={"ALMANAC_CONFIG": str(config)})
    code, _, _ = _run("token", "list", "--owner", "bob@example.com", "--data-dir", str(file_dir))
    assert code == 0  # bob went to the config file's data directory


@pytest.mark.req("run:cli")
def test_admin_commands_refuse_a_folder_without_a_control_database(home: Path, tmp_path: Path) -> None:
    typo = tmp_path / "dtaa"
    for args in (
        ("token", "list", "--owner", OWNER),
        ("token", "create", "--owner", OWNER, "--name", "x"),
        ("workspace", "list", "--owner", OWNER),
        ("audit",),
    ):
        code, out, err = _run(*args, "--data-dir", str(typo))
        assert code != 0 and out == "", args
        assert err.count("\n") == 1 and "no Almanac data in" in err and "almanac serve" in err, err
    assert not typo.exists()  # nothing was created


@pytest.mark.req("run:cli")
def test_tilde_is_expanded_in_path_options(home: Path) -> None:
    code, _, err = _run("owner", "create", OWNER, "--data-dir", "~/mem")
    assert code == 0, err
    assert (home / "mem" / "control.db").is_file() and not Path("~").exists()
    code, _, err = _run("owner", "create", "bob@example.com", env={"ALMANAC_DATA_DIR": "~/mem2"})
    assert code == 0 and (home / "mem2" / "control.db").is_file()


@pytest.mark.req("run:cli")
def test_a_corrupt_control_database_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    garbage = b"this is not a database" * 100
    (data / "control.db").write_bytes(garbage)
    code, _, err = _run("token", "list", "--owner", OWNER, "--data-dir", str(data))
    assert code != 0 and err.count("\n") == 1 and "not a usable Almanac control database" in err
    assert (data / "control.db").read_bytes() == garbage
