"""The Dockerfile and docker-compose.yml (run:docker): linted, schema-checked, and the image's own
entry and health-check commands run here. No Docker engine runs on this machine."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.support import ROOT, clean_env, free_port, running, tool
from tests.test_packaging import PACKAGES

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(x for x in text.splitlines() if not x.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage(text: str) -> list[tuple[str, str]]:
    steps = instructions(text)
    last = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last:]


def env_of(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for word, args in stage:
        if word == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def exec_form(args: str) -> list[str]:
    form = json.loads(args)
    assert isinstance(form, list) and all(isinstance(a, str) for a in form)
    return form


@pytest.mark.req("run:docker")
def test_hadolint_passes_and_would_catch_a_mistake(tmp_path: Path) -> None:
    result = tool("hadolint", "--no-color", str(DOCKERFILE))
    assert result.returncode == 0, result.stdout + result.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        DOCKERFILE.read_text(encoding="utf-8").replace("USER 10001:10001", "USER root"), encoding="utf-8"
    )
    assert tool("hadolint", "--no-color", str(bad)).returncode != 0


@pytest.mark.req("run:docker")
def test_multi_stage_non_root_with_volume_health_check_and_no_build_tools() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    steps = instructions(text)
    assert sum(word == "FROM" for word, _ in steps) >= 2
    stage = final_stage(text)
    assert stage[0][1].split()[0] == steps[0][1].split()[0]  # the same slim Python base, no toolchain
    users = [args for word, args in stage if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    env = env_of(stage)
    volumes = [v for word, args in stage if word == "VOLUME" for v in json.loads(args)]
    assert env["ALMANAC_DATA_DIR"] in volumes
    assert any(word == "HEALTHCHECK" for word, _ in stage)
    runs = " ".join(args for word, args in stage if word == "RUN")
    assert not re.search(r"apt-get install|gcc|build-essential|pip install", runs)
    copies = [args for word, args in stage if word == "COPY"]
    assert copies == ["--from=build /opt/almanac /opt/almanac"]  # only the built virtualenv
    built = " ".join(args for word, args in steps[: len(steps) - len(stage)] if word == "COPY")
    for package in (*PACKAGES, "migrations", "setup.py"):  # the build stage has every shipped source
        assert re.search(rf"\b{package}\b", built), package


@pytest.mark.req("run:docker")
def test_the_image_commands_work_when_run_directly(tmp_path: Path) -> None:
    """CMD and HEALTHCHECK as the container would run them, with the image's environment (the data
    volume and the port pointed at this test's own folder and a free port)."""
    stage = final_stage(DOCKERFILE.read_text(encoding="utf-8"))
    env = env_of(stage)
    port = free_port()
    env.update(ALMANAC_DATA_DIR=str(tmp_path / "data"), ALMANAC_PORT=str(port), ALMANAC_EMBEDDER="false")
    env.pop("PATH", None)
    (cmd,) = [exec_form(args) for word, args in stage if word == "CMD"]
    (check,) = [args for word, args in stage if word == "HEALTHCHECK"]
    probe = exec_form(check[check.index("CMD") + len("CMD") :].strip())
    full = clean_env(env)
    with running(cmd, full, port, tmp_path / "container.log"):
        assert (tmp_path / "data" / "control.db").is_file()
        assert subprocess.run(probe, env=full, timeout=30).returncode == 0
        assert json.loads(
            (tmp_path / "container.log").read_text(encoding="utf-8").splitlines()[-1]
        )  # JSON logs
    assert subprocess.run(probe, env=full, timeout=30, capture_output=True).returncode != 0  # it can fail


@pytest.mark.req("run:docker")
def test_compose_file_matches_the_compose_specification(tmp_path: Path) -> None:
    result = tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert result.returncode == 0, result.stdout + result.stderr
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(COMPOSE.read_text(encoding="utf-8").replace("restart:", "restrat:", 1), encoding="utf-8")
    assert tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(bad)).returncode != 0


@pytest.mark.req("run:docker")
def test_compose_runs_the_gateway_on_a_named_volume_with_an_optional_tls_proxy() -> None:
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    gateway = compose["services"]["almanac"]
    data_dir = env_of(final_stage(DOCKERFILE.read_text(encoding="utf-8")))["ALMANAC_DATA_DIR"]
    volume, _, target = gateway["volumes"][0].partition(":")
    assert target == data_dir and volume in compose["volumes"]
    assert gateway["build"] == "."
    proxy = compose["services"]["caddy"]
    assert proxy["profiles"] == ["tls"]
    caddyfile = proxy["volumes"][0].split(":")[0]
    assert (ROOT / caddyfile).is_file()
    assert "reverse_proxy almanac:8080" in (ROOT / caddyfile).read_text(encoding="utf-8")
