"""Structured JSON logs: one object per line on stderr, with an ``event`` name and its fields."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

LOGGER_NAME = "almanac.gateway"
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}
_QUIET = ("httpx", "httpcore")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str, fmt: str) -> None:
    """Install the handler on the root logger (the composition root calls this once)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in _QUIET:  # one line per upstream request would double the log volume
        logging.getLogger(name).setLevel(logging.WARNING)


def get() -> logging.Logger:
    return logging.getLogger(LOGGER_NAME)


def event(logger: logging.Logger, level: int, name: str, **fields: Any) -> None:
    """Log one event: ``name`` is a stable dotted name (``engine.start``), ``fields`` its data."""
    logger.log(level, name, extra={"event": name, **fields})
