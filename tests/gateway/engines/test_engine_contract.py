"""The supervisor ↔ engine contract, checked with both sides' real code (``settings:layers``).

The gateway builds the engine's argument lists, the warm spare's assignment line and the internal
identity headers; the engine parses them. Each test feeds one side's output to the other side's
parser, so a flag, key or header renamed on one side alone fails here (it once did in production:
``--settings`` was passed but not accepted, and every cold start exited 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.index.indexer import MAX_ITEM_BYTES
from engine.server import import_limits, parse_args, parse_assignment
from engine.surface.connection import HEADER_CONNECTION, HEADER_READ_ONLY, HEADER_SCOPE, identity_of
from engine.transfer.limits import Limits
from gateway.control.records import Principal
from gateway.engines.spare import assignment_line
from gateway.engines.supervisor import engine_argv, spare_argv
from gateway.headers import identity
from tests.gateway.conftest import ENGINE
from tests.gateway.engines.test_supervisor import _until, healthz, make_config, supervising

pytestmark = pytest.mark.anyio


def _engine_args(argv: tuple[str, ...]) -> list[str]:
    assert argv[: len(ENGINE)] == ENGINE
    return list(argv[len(ENGINE) :])


@pytest.mark.req("settings:layers")
def test_the_engine_parses_the_supervisors_engine_spare_and_fork_server_argument_lists(
    tmp_path: Path,
) -> None:
    settings = tmp_path / "engine-settings.json"
    config = make_config(tmp_path, embedder_socket=tmp_path / "embedder.sock", engine_settings_file=settings)
    args = parse_args(_engine_args(engine_argv(config, tmp_path / "a.sock", tmp_path / "ws" / "a")))
    assert args.socket == str(tmp_path / "a.sock")
    assert args.dir == str(tmp_path / "ws" / "a")
    assert args.embedder_socket == str(tmp_path / "embedder.sock")
    assert args.settings == settings and args.exit_with_parent
    spare = parse_args(_engine_args(spare_argv(config)))
    assert spare.await_assignment and spare.settings == settings and spare.exit_with_parent
    assert spare.embedder_socket == str(tmp_path / "embedder.sock")
    forks = parse_args(_engine_args(spare_argv(config, "--fork-server")))
    assert forks.fork_server and not forks.await_assignment and forks.settings == settings
    assert forks.exit_with_parent and forks.embedder_socket == str(tmp_path / "embedder.sock")
    bare = make_config(tmp_path)  # no embedder, no settings file: the lists still parse
    assert parse_args(_engine_args(engine_argv(bare, tmp_path / "b.sock", tmp_path / "b"))).settings is None
    assert parse_args(_engine_args(spare_argv(bare))).await_assignment


@pytest.mark.req("rel:fuzz")
def test_the_operators_unpacked_import_limit_reaches_every_engine(tmp_path: Path) -> None:
    config = make_config(tmp_path, import_max_unpacked_bytes=5_000_000)
    for argv in (
        engine_argv(config, tmp_path / "a.sock", tmp_path / "a"),
        spare_argv(config),
        spare_argv(config, "--fork-server"),
    ):
        args = parse_args(_engine_args(argv))
        assert import_limits(args) == Limits(file_bytes=MAX_ITEM_BYTES, total_bytes=5_000_000)
    bare = parse_args(_engine_args(engine_argv(make_config(tmp_path), tmp_path / "b.sock", tmp_path / "b")))
    assert import_limits(bare) == Limits()


def test_the_engine_reads_the_spares_assignment_line(tmp_path: Path) -> None:
    line = assignment_line(tmp_path / "a.sock", tmp_path / "ws" / "a", tmp_path / "logs" / "a.log")
    assert parse_assignment(line.decode()) == (
        str(tmp_path / "a.sock"),
        str(tmp_path / "ws" / "a"),
        str(tmp_path / "logs" / "a.log"),
    )


@pytest.mark.parametrize(
    ("read_only", "scope", "unscoped"),
    [(True, "project:fjord", False), (False, "project:fjord", True), (False, None, False)],
)
def test_the_engine_reads_the_identity_the_gateway_sends(
    read_only: bool, scope: str | None, unscoped: bool
) -> None:
    principal = Principal(
        "own_1", "ws_1", "con_1", "Claude Code — laptop/ä", read_only, scope, reads_unscoped=unscoped
    )
    sent = identity(principal)
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in sent}
    caller = identity_of(headers)
    assert caller.connection == principal.connection_name
    assert caller.read_only is read_only
    assert caller.pinned_scope == scope
    assert caller.reads_unscoped is unscoped
    assert {HEADER_CONNECTION, HEADER_READ_ONLY} <= set(headers)
    assert (HEADER_SCOPE in headers) is (scope is not None)  # sent only when the connection is pinned


@pytest.mark.req("settings:layers")
async def test_engines_started_with_a_settings_file_answer_cold_and_from_the_spare(tmp_path: Path) -> None:
    settings = tmp_path / "engine-settings.json"
    settings.write_text(json.dumps({"half_life_days": 30, "embedding_provider": "off"}))
    async with supervising(make_config(tmp_path, engine_settings_file=settings, warm_spare=False)) as sup:
        assert await healthz(sup, "ws_cold") == 200
    async with supervising(
        make_config(tmp_path / "s", engine_settings_file=settings, fork_server=False)
    ) as sup:
        await _until(lambda: sup.spare_pid is not None, "a spare")
        spare = sup.spare_pid
        assert await healthz(sup, "ws_warm") == 200
        assert sup.pids()["ws_warm"] == spare
    async with supervising(make_config(tmp_path / "f", engine_settings_file=settings)) as sup:
        await _until(lambda: sup.is_fork_server_ready, "the fork server")
        assert await healthz(sup, "ws_forked") == 200
        assert sup.metrics.starts_by_kind.labels("fork")._value.get() == 1
