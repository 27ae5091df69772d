"""Where the gateway keeps things under its data directory (pure path arithmetic).

    <data_dir>/control.db              the control plane (owners, workspaces, tokens, audit)
    <data_dir>/workspaces/<ws id>/     one workspace's store, owned by its engine
    <data_dir>/logs/<ws id>.log        an engine's stderr (the embedder's is embedder.log)
    <runtime_dir>/<ws id>.sock         an engine's socket (embedder.sock for the embedder)

Unix socket paths are limited to 107 bytes, so when ``<data_dir>/run`` is too long the runtime
directory falls back to a short private temporary directory, which the gateway removes when it stops.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gateway.errors import DataDirError

_MAX_SOCKET_PATH = 100
_LONGEST_SOCKET_NAME = len("ws_0123456789abcdef.sock") + 1


def control_db(data_dir: Path) -> Path:
    return data_dir / "control.db"


def workspace_dir(data_dir: Path, workspace_id: str) -> Path:
    return data_dir / "workspaces" / workspace_id


def log_file(data_dir: Path, name: str) -> Path:
    return data_dir / "logs" / f"{name}.log"


def runtime_dir(data_dir: Path, configured: Path | None) -> Path:
    """The socket directory (created, mode 0700), or :class:`DataDirError` when it cannot be used."""
    candidate = configured if configured is not None else data_dir.resolve() / "run"
    if configured is None and len(str(candidate)) + _LONGEST_SOCKET_NAME > _MAX_SOCKET_PATH:
        return Path(tempfile.mkdtemp(prefix="almanac-"))
    try:
        candidate.mkdir(parents=True, exist_ok=True)
        candidate.chmod(0o700)
        with tempfile.TemporaryFile(dir=candidate):  # the engines' sockets are made in it
            pass
    except OSError as exc:
        raise DataDirError(
            f"cannot use the socket folder {candidate} ({exc.strerror}); make it writable by the user "
            "running almanac, or choose another with runtime_dir (ALMANAC_RUNTIME_DIR)"
        ) from None
    return candidate


def is_temporary(run_dir: Path, data_dir: Path, configured: Path | None) -> bool:
    """Whether ``run_dir`` is the private fallback of :func:`runtime_dir` (the gateway's to remove)."""
    return configured is None and run_dir != data_dir.resolve() / "run"


def socket_path(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.sock"
