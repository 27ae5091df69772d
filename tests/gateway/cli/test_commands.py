"""The CLI contract (run:cli): exact command forms, token on stdout only, --help everywhere."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gateway.cli import main
from gateway.control import tokens
from gateway.control.store import ControlPlane


def _run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [prefix]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


@pytest.mark.req("run:cli")
def test_every_command_has_help() -> None:
    commands = _commands(main)
    assert ("serve",) in commands and ("token", "create") in commands and ("owner", "create") in commands
    for command in commands:
        code, out, _ = _run(*command, "--help")
        assert code == 0, command
        assert "Usage:" in out and "--help" in out


@pytest.mark.req("run:cli", "gw:pat")
def test_owner_then_token_prints_only_the_token(data_dir: Path) -> None:
    d = str(data_dir)
    code, out, err = _run("owner", "create", "ada@example.com", "--data-dir", d, stdin="s3cret pass\n")
    assert code == 0 and out == "" and "ada@example.com" in err
    code, out, err = _run(
        "token", "create", "--owner", "ada@example.com", "--name", "laptop", "--read-only",
        "--scope", "project:fjord", "--data-dir", d,
    )  # fmt: skip
    assert code == 0, err
    secret = out.strip()
    assert out == secret + "\n" and tokens.looks_like_token(secret)
    store = ControlPlane.open(data_dir / "control.db")
    try:
        principal = store.connections.authenticate(secret)
        assert principal is not None and principal.read_only and principal.scope == "project:fjord"
        owner = store.owners.by_email("ada@example.com")
        stored = store.owners.password_hash(owner.id)
        assert stored is not None and stored.startswith("$argon2id$")
    finally:
        store.close()


@pytest.mark.req("run:cli", "gw:pat")
def test_list_and_revoke(data_dir: Path) -> None:
    d = str(data_dir)
    _run("owner", "create", "ada@example.com", "--data-dir", d, stdin="")
    _run("workspace", "create", "research", "--owner", "ada@example.com", "--data-dir", d)
    code, out, _ = _run("workspace", "list", "--owner", "ada@example.com", "--data-dir", d)
    assert [line.split("\t")[1] for line in out.splitlines()] == ["default", "research"]
    _, secret, _ = _run("token", "create", "--owner", "ada@example.com", "--name", "a", "--data-dir", d)
    _run(
        "token",
        "create",
        "--owner",
        "ada@example.com",
        "--name",
        "b",
        "--workspace",
        "research",
        "--data-dir",
        d,
    )
    code, out, _ = _run("token", "list", "--owner", "ada@example.com", "--data-dir", d)
    rows = [line.split("\t") for line in out.splitlines()]
    assert [(r[1], r[2], r[3], r[-1]) for r in rows] == [
        ("a", "default", "read-write", "pat"),
        ("b", "research", "read-write", "pat"),
    ]
    assert secret.strip() not in out and rows[0][5].rstrip("…") == secret.strip()[: len(rows[0][5]) - 1]
    code, _, err = _run("token", "revoke", "a", "--owner", "ada@example.com", "--data-dir", d)
    assert code == 0 and "revoked" in err
    code, out, _ = _run("token", "list", "--owner", "ada@example.com", "--data-dir", d)
    assert [line.split("\t")[1] for line in out.splitlines()] == ["b"]
    code, out, _ = _run("token", "list", "--owner", "ada@example.com", "--all", "--data-dir", d)
    assert len(out.splitlines()) == 2
    code, out, _ = _run("audit", "--owner", "ada@example.com", "--data-dir", d)
    assert '"kind": "token.revoke"' in out.splitlines()[0]


@pytest.mark.req("run:cli")
def test_errors_are_one_line_and_non_zero(data_dir: Path, tmp_path: Path) -> None:
    d = str(data_dir)
    _run("owner", "create", "ada@example.com", "--data-dir", d, stdin="")
    code, out, err = _run("token", "create", "--owner", "nobody@example.com", "--name", "x", "--data-dir", d)
    assert code == 1 and out == "" and err.startswith("error: no owner")
    code, _, err = _run(
        "token", "create", "--owner", "ada@example.com", "--name", "x", "--scope", "Bad..", "--data-dir", d
    )
    assert code == 1 and "scope" in err
    code, _, err = _run(
        "token", "create", "--owner", "ada@example.com", "--name", "x", "--workspace", "nope", "--data-dir", d
    )
    assert code == 1 and "almanac workspace create" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("max_engines = 0\n", encoding="utf-8")
    code, _, err = _run("token", "list", "--owner", "ada@example.com", "--config", str(bad), "--data-dir", d)
    assert code == 2 and "max_engines" in err


@pytest.mark.req("run:cli")
def test_version() -> None:
    code, out, _ = _run("--version")
    assert code == 0 and out == f"almanac {version('almanac')}\n"


@pytest.mark.req("run:cli")
def test_workspace_usage_counts_what_is_on_disk(data_dir: Path) -> None:
    d = str(data_dir)
    _run("owner", "create", "ada@example.com", "--data-dir", d, stdin="")
    code, out, _ = _run("workspace", "list", "--owner", "ada@example.com", "--data-dir", d)
    folder = Path(out.split("\t")[3].strip())
    assert folder.parent == data_dir.absolute() / "workspaces"
    (folder / "notes" / "2026" / "01" / "02").mkdir(parents=True)
    (folder / "notes" / "2026" / "01" / "02" / "a.md").write_text("x" * 10, encoding="utf-8")
    (folder / "facts").mkdir()
    (folder / "facts" / "2026-01.md").write_text("y" * 5, encoding="utf-8")
    (folder / ".index").mkdir()
    (folder / ".index" / "index.sqlite").write_bytes(b"z" * 7)
    code, out, err = _run("workspace", "usage", "--owner", "ada@example.com", "--data-dir", d)
    assert code == 0, err
    rows = dict(line.split("\t") for line in out.splitlines())
    assert (rows["notes"], rows["ledger segments"], rows["day logs"]) == ("1", "1", "0")
    assert (rows["store bytes"], rows["index bytes"]) == ("15", "7")
    code, _, err = _run("workspace", "usage", "nope", "--owner", "ada@example.com", "--data-dir", d)
    assert code == 1 and "nope" in err
