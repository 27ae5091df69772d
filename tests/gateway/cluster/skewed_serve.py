"""``almanac serve`` whose composition root is given a wall clock ``OFFSET`` seconds off the host's
(:func:`gateway.serve.run`'s ``clock``): a real node on a host whose clock is wrong, as the
clock-skew tests start it (``python -m tests.gateway.cluster.skewed_serve OFFSET --port P
--data-dir D``; every other setting from ``ALMANAC_…`` variables, as ``almanac serve``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gateway.cli.common import make_settings
from gateway.errors import ConfigError
from gateway.serve import run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("offset", type=float)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    offset: float = args.offset
    try:
        run(make_settings(None, port=args.port, data_dir=args.data_dir), clock=lambda: time.time() + offset)
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
