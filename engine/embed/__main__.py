"""``python -m engine.embed --socket PATH [--threads N]``: run the host embedder service.

Exit status: 0 after SIGTERM/SIGINT, 2 for bad arguments, 3 when a service already listens on the
socket.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.embed.local import LocalEmbedder
from engine.embed.service import ServiceAlreadyRunning, serve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.embed", description="Serve the local embedding model on a Unix socket."
    )
    parser.add_argument("--socket", required=True, type=Path, help="path of the Unix socket to create")
    parser.add_argument(
        "--threads", type=int, default=1, help="ONNX Runtime intra-op threads per embedding (1)"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (32)")
    parser.add_argument("--model-path", type=Path, help="a copy of model.onnx instead of the packaged one")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.batch_size < 1:
        parser.error("--threads and --batch-size must be at least 1")
    embedder = LocalEmbedder(model_path=args.model_path, threads=args.threads, batch_size=args.batch_size)
    try:
        serve(args.socket, embedder)
    except ServiceAlreadyRunning as exc:
        print(f"python -m engine.embed: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
