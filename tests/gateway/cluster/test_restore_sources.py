"""A lost workspace restored from its owner's export, and a large file restored in bounded memory
(``run:scale-out``): a real PostgreSQL, two real nodes (node-c declared lost, node-a the
target), the owner's export downloaded through the REST API (``GET /api/v1/admin/export``) while
node-c ran, and the real ``almanac workspace restore`` command.

An export that cannot be restored — not a zip, not an Almanac export, another workspace's, a path
that leaves the folder, a damaged file — is refused naming what is wrong, before anything is sent:
the workspace stays lost and the target holds nothing of it. The owner's own export is restored,
checked file by file, and served with every write it holds. A backup holding a file far larger than
the chunk a restore reads at once is restored byte for byte by a command whose peak memory grows by
much less than that file."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.gateway.cluster.nodes import Cluster, started_nodes
from tests.gateway.cluster.test_interrupted_moves import _all_served, _almanac, _at, _env, _run, _write
from tests.gateway.cluster.test_recovery import _heard_from, _lost, _owner_on
from tests.gateway.cluster.test_three_nodes import _call
from tests.gateway.e2e import ALMANAC, Gateway, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

#: The large file's size, and how much more than a small restore's the command may use at its peak.
LARGE, MEMORY_BOUND = 96 << 20, 40 << 20


cluster = started_nodes("cluster", "sources", ("node-a", "node-c"), Cluster)


def _download_export(node: Gateway, token: str, target: Path) -> Path:
    with httpx.stream(
        "GET", node.url + "/api/v1/admin/export", headers={"Authorization": f"Bearer {token}"}, timeout=120
    ) as response:
        assert response.status_code == 200, response.read()
        with target.open("wb") as out:
            for chunk in response.iter_bytes():
                out.write(chunk)
    return target


def _restore(node: Gateway, email: str, source: Path) -> subprocess.CompletedProcess[str]:
    return _almanac(
        node, "workspace", "restore", "default", "--owner", email, "--from", str(source), "--to", "node-a"
    )


#: Runs a command and prints its peak resident memory (KiB). A small process of its own, since a
#: child forked from this test's process would count this process's memory as its own.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


def _peak_rss(node: Gateway, *args: str) -> tuple[int, str, int]:
    """Run ``almanac ARGS``: (exit code, stderr, its peak resident memory in bytes)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, ALMANAC, *args, *_at(node)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(node),
    )
    return done.returncode, done.stderr, int(done.stdout.strip()) * 1024  # Linux: kibibytes


def _rewritten(source: Path, target: Path, change: dict[str, bytes], manifest_too: bool) -> Path:
    """A copy of the export ``source`` with the files ``change`` (added or replaced) — listed in its
    manifest with their true size and SHA-256 when ``manifest_too``, else the manifest is kept."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        described = json.loads(old.read("almanac-export.json"))
        for info in old.infolist():
            if info.filename not in change and info.filename != "almanac-export.json":
                new.writestr(info, old.read(info))
        for name, data in change.items():
            new.writestr(name, data)
            if manifest_too:
                described["files"].append(
                    {"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                )
        new.writestr("almanac-export.json", json.dumps(described))
    return target


@pytest.mark.req("run:scale-out")
async def test_a_lost_workspace_is_restored_from_its_owner_s_export_and_a_large_file_in_bounded_memory(
    cluster: Cluster, tmp_path: Path
) -> None:
    a = cluster.nodes["node-a"]
    _, mia, mia_token = _owner_on(cluster, "mia@example.com", "node-c")
    _, ned, ned_token = _owner_on(cluster, "ned@example.com", "node-c")
    mia_writes = [f"mia maps the {w} for the export" for w in ("reef", "channel", "shoal")]
    ned_writes = ["ned sounds the bay before the backup"]
    await _write(a, mia_token, mia_writes)  # forwarded to node-c
    await _write(a, ned_token, ned_writes)
    exported = _download_export(a, mia_token, tmp_path / "mia.zip")  # through node-a, made on node-c
    with zipfile.ZipFile(exported) as archive:
        assert json.loads(archive.read("almanac-export.json"))["workspace"] == mia
    others = _download_export(a, ned_token, tmp_path / "ned.zip")
    backup = tmp_path / "backup" / ned
    shutil.copytree(
        cluster.nodes["node-c"].data_dir / "workspaces" / ned,
        backup,
        ignore=shutil.ignore_patterns(".index", ".cache", "*.lock"),
    )
    (backup / "attachments").mkdir()
    large = backup / "attachments" / "survey.bin"  # not Markdown: the engine leaves it alone
    with large.open("wb") as out:
        for _ in range(LARGE >> 20):
            out.write(os.urandom(1 << 20))
    cluster.kill("node-c")
    wait_for(lambda: time.time() - _heard_from(cluster, "node-c") > 2.5, timeout=30, what="node-c silent")
    declared = _almanac(a, "node", "lost", "node-c", "--confirm")
    assert declared.returncode == 0, declared.stderr

    # refused before anything is sent, naming what is wrong: still lost, nothing on node-a
    (tmp_path / "notes.txt").write_text("these are not the files you are looking for")
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as archive:
        archive.writestr("notes/a.md", "Markdown, but not an export")
    escape = _rewritten(exported, tmp_path / "escape.zip", {"../../escape.md": b"out"}, True)
    tampered = _a_memory_altered(exported)  # the same size, one byte changed
    damaged = _rewritten(exported, tmp_path / "damaged.zip", tampered, False)
    planted = _rewritten(exported, tmp_path / "planted.zip", {".cache/store-yaml.json": b"{}"}, True)
    refusals = {
        tmp_path / "notes.txt": "is not a zip file",
        plain: "not an Almanac export",
        others: f"it is the export of workspace '{ned}', not of '{mia}'",
        escape: "leaves the workspace",
        damaged: "does not match its SHA-256",
        planted: "which an export never holds",
    }
    for source, problem in refusals.items():
        refused = _restore(a, "mia@example.com", source)
        assert refused.returncode == 1 and problem in refused.stderr, (source, refused.stderr)
        assert "nothing changed" in refused.stderr
        assert _lost(_call(a, mia_token))
        held = a.data_dir / "workspaces"
        assert not held.exists() or not [p for p in held.iterdir() if mia in p.name]  # nor staged
    assert not (tmp_path / "escape.md").exists() and not (a.data_dir / "escape.md").exists()

    # the owner's export: restored, checked, served
    restored = _restore(a, "mia@example.com", exported)
    assert restored.returncode == 0, restored.stderr
    assert cluster.node_of(mia) == "node-a"
    await _all_served(a, mia_token, mia_writes)
    with zipfile.ZipFile(exported) as archive:
        names = [n for n in archive.namelist() if n != "almanac-export.json"]
        for name in names:
            assert (a.data_dir / "workspaces" / mia / name).read_bytes() == archive.read(name), name
    assert "restored from the owner's export" in _run(a, "mia@example.com", "--status").stdout

    # a file ~96 chunks long, in bounded memory: the peak next to a restore that sends nothing
    code, err, baseline = _peak_rss(
        a, "workspace", "restore", "default", "--owner", "ned@example.com", "--abandon"
    )
    assert code == 1 and "no restore" in err, err
    code, err, peak = _peak_rss(
        a,
        "workspace",
        "restore",
        "default",
        "--owner",
        "ned@example.com",
        "--from",
        str(backup),
        "--to",
        "node-a",
    )
    assert code == 0, err
    print(f"restore of a {LARGE >> 20} MiB file: peak {peak >> 20} MiB, baseline {baseline >> 20} MiB")
    assert peak - baseline < MEMORY_BOUND, f"peak {peak >> 20} MiB, baseline {baseline >> 20} MiB"
    copy = a.data_dir / "workspaces" / ned / "attachments" / "survey.bin"
    assert copy.stat().st_size == LARGE
    assert _sha256(copy) == _sha256(large)
    await _all_served(a, ned_token, ned_writes)


def _a_memory_altered(export: Path) -> dict[str, bytes]:
    """One Markdown file of the export's store, one byte of it changed."""
    with zipfile.ZipFile(export) as archive:
        found = [n for n in archive.namelist() if n.endswith(".md")]
        assert found, "the export holds the memories written"
        data = archive.read(found[0])
    return {found[0]: bytes([data[0] ^ 0x20]) + data[1:]}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
