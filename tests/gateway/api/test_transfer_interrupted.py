"""An import whose gateway is killed outright (``rel:kill``, ``life:import``): the orphaned engine
gives the import up at once instead of finishing it for nobody while it holds the workspace, leaves
nothing half-imported, and the retry through a new gateway imports exactly once."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.gateway.e2e import alive, start_gateway, wait_for
from tests.vaults import many_notes_zip

OWNER = "orla@example.com"
NOTES = 3000
#: How long the orphaned engine may take to notice, give up and stop (its lifeline polls four
#: times a second; a stop then waits for requests in flight, at most a few seconds).
STOP_BOUND_S = 15.0


def _import(url: str, token: str, upload: bytes) -> httpx.Response:
    return httpx.post(
        url + "/api/v1/admin/import",
        params={"label": "Big"},
        content=upload,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/zip"},
        timeout=300,
    )


def _staged(folder: Path) -> bool:
    staging = folder / ".transfer-import"
    return staging.is_dir() and any(staging.rglob("*.md"))


@pytest.mark.req("rel:kill", "life:import")
def test_killing_the_gateway_mid_import_abandons_it_and_the_retry_imports_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    upload = many_notes_zip(NOTES)
    gateway = start_gateway(data, tmp_path / "first.log", engine_warm_spare="false")
    try:
        gateway.owner(OWNER)
        token = gateway.token(OWNER, "Importer")
        folder = gateway.workspace_dir(OWNER)
        failed: list[BaseException] = []

        def send() -> None:
            try:
                _import(gateway.url, token, upload)
            except httpx.HTTPError as exc:
                failed.append(exc)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        wait_for(lambda: _staged(folder), timeout=180, what="the import to begin staging notes")
        engine = gateway.engines()[folder]
        gateway.proc.send_signal(signal.SIGKILL)
        gateway.proc.wait(timeout=10)
        killed = time.monotonic()
    finally:
        if gateway.proc.poll() is None:  # pragma: no cover - only when the test fails early
            gateway.proc.kill()
            gateway.proc.wait()
        if gateway.proc.stdout is not None:
            gateway.proc.stdout.close()
    try:
        wait_for(lambda: not alive(engine), timeout=STOP_BOUND_S, what="the orphaned engine to give up")
    finally:
        if alive(engine):  # pragma: no cover - only when the test fails
            os.kill(engine, signal.SIGKILL)
    gave_up = time.monotonic() - killed
    sender.join(timeout=30)
    assert failed, "the first import's caller saw its gateway die"
    assert not (folder / "notes" / "Imported" / "Big").exists()  # nothing half-imported
    assert not (folder / ".transfer-import").exists()  # the abandoned import took its staging away

    again = start_gateway(data, tmp_path / "second.log", engine_warm_spare="false")
    try:
        retried = _import(again.url, token, upload)
        assert retried.status_code == 200, retried.text
        assert len(retried.json()["imported"]) == NOTES
        imported = folder / "notes" / "Imported"
        assert [p.name for p in imported.iterdir()] == ["Big"]  # one copy, under the label asked for
        assert len(list((imported / "Big").rglob("*.md"))) == NOTES
    finally:
        again.stop()
    print(f"the orphaned engine stopped {gave_up:.1f} s after its gateway was killed")
