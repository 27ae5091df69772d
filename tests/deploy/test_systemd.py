"""deploy/systemd/almanac.service: systemd accepts it, and its command serves and stops cleanly."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.deploy.support import BIN, ROOT, clean_env, free_port, running

UNIT = ROOT / "deploy" / "systemd" / "almanac.service"
INSTALLED = "/opt/almanac/bin/almanac"


def directives(text: str) -> dict[str, list[str]]:
    """``Section.Key → values`` of a unit file (keys may repeat, e.g. ``Environment``)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key}", []).append(value)
    return found


def installed_here(tmp_path: Path) -> Path:
    """The unit as it would be after installing into this machine's virtualenv."""
    unit = tmp_path / "almanac.service"
    unit.write_text(
        UNIT.read_text(encoding="utf-8").replace(INSTALLED, str(BIN / "almanac")), encoding="utf-8"
    )
    return unit


@pytest.mark.req("run:docker")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    result = subprocess.run(
        ["systemd-analyze", "verify", str(installed_here(tmp_path))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr
    bad = tmp_path / "bad.service"
    bad.write_text(
        installed_here(tmp_path).read_text(encoding="utf-8").replace("Restart=on-failure", "Restart=often")
    )
    result = subprocess.run(
        ["systemd-analyze", "verify", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert "restart specifier" in result.stderr


@pytest.mark.req("run:docker")
def test_the_units_command_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    unit = directives(UNIT.read_text(encoding="utf-8"))
    assert unit["Service.User"] == ["almanac"] and unit["Service.StateDirectory"] == ["almanac"]
    env = dict(pair.split("=", 1) for pair in unit["Service.Environment"])
    assert env["ALMANAC_DATA_DIR"] == "/var/lib/almanac"  # the StateDirectory
    port = free_port()
    env.update(ALMANAC_DATA_DIR=str(tmp_path / "data"), ALMANAC_PORT=str(port), ALMANAC_EMBEDDER="false")
    (command,) = unit["Service.ExecStart"]
    argv = command.replace(INSTALLED, str(BIN / "almanac")).split()
    with running(argv, clean_env(env), port, tmp_path / "journal.log") as proc:
        proc.send_signal(signal.SIGTERM)  # what `systemctl stop` sends first (KillMode=mixed)
        timeout = float(unit["Service.TimeoutStopSec"][0])
        # systemd counts an exit by SIGTERM as clean (uvicorn re-raises it after its graceful stop)
        assert proc.wait(timeout=timeout) in (0, -signal.SIGTERM)
    assert "Traceback" not in (tmp_path / "journal.log").read_text(encoding="utf-8")
