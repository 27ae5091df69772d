"""``pip install .`` (not editable) gives a working ``almanac serve`` outside the repository: the
migrations, the tokenizer and every other data file ship in the wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.e2e import wait_for

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(
    name.rstrip("*")
    for name in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
)
SOURCES = ("pyproject.toml", "setup.py", "README.md", "migrations", *PACKAGES)


def build_wheel(tmp: Path) -> Path:
    """The wheel, built from a copy of the sources (the checkout gets no build/ or egg-info)."""
    src = tmp / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, src / name)
    out = tmp / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("almanac-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A new virtualenv with the wheel installed (not editable). Its dependencies are borrowed from
    this test run's environment through a path entry, so nothing is downloaded."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()
    Path(purelib, "borrowed-deps.pth").write_text(f"{ours['purelib']}\n{ours['platlib']}\n", encoding="utf-8")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return venv


@pytest.mark.req("run:two-commands")
def test_the_wheel_installs_and_serves_outside_the_repository(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "gateway/control/migrations/0001_initial.sql",
        "gateway/control/migrations/postgresql/0001_initial.sql",
        "engine/embed/tokenizer.json",
        "engine/embed/NOTICE",
        "gateway/py.typed",
        "gateway/web/templates/login.html",
        "gateway/web/static/almanac.css",
        "almanac/host/__init__.py",
    ):
        assert expected in names, expected
    assert not any(n.startswith(("tests/", "bench/")) for n in names)

    venv = fresh_venv(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ALMANAC_", "PYTHON"))}
    env.update(HOME=str(tmp_path / "home"), ALMANAC_EMBEDDER="false")
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import gateway, engine; print(gateway.__file__, engine.__file__)",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.count(str(venv)) == 2 and str(ROOT) not in where

    almanac = str(venv / "bin" / "almanac")
    log = tmp_path / "serve.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [almanac, "serve", "--port", "0"], cwd=elsewhere, env=env, stdout=subprocess.PIPE, stderr=stderr
        )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        found = re.search(r"serving MCP at (http://\S+/mcp)", first)
        assert found, first + log.read_text(encoding="utf-8")
        url = found.group(1)
        base = url.removesuffix("/mcp")
        wait_for(lambda: httpx.get(base + "/healthz", timeout=5).status_code == 200)
        for page in ("/login", "/static/almanac.css"):  # templates and static files came with the wheel
            assert httpx.get(base + page, timeout=10).status_code == 200, page
        data = tmp_path / "home" / ".local" / "share" / "almanac"
        assert (data / "control.db").is_file()
        run = {
            "cwd": elsewhere,
            "env": env,
            "capture_output": True,
            "text": True,
            "check": True,
            "timeout": 120,
        }
        subprocess.run([almanac, "owner", "create", "ada@example.com"], stdin=subprocess.DEVNULL, **run)  # type: ignore[call-overload]
        token = subprocess.run(  # type: ignore[call-overload]
            [almanac, "token", "create", "--owner", "ada@example.com", "--name", "wheel"], **run
        ).stdout.strip()

        async def use() -> object:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                result = await client.call_tool("remember", {"statement": "installed from a wheel"})
                assert not result.is_error, result.content
                return (result.structured_content or {}).get("action")

        assert anyio.run(use) == "store"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()
