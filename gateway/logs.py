"""Logs on stderr: one JSON object per line, or one human-readable line on a terminal.

Every record has an ``event`` name and its fields. ``log_format = "auto"`` (the default) picks text
when stderr is a terminal and JSON otherwise (a service manager, a container, a file)."""

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


class TextFormatter(logging.Formatter):
    """``12:03:04 warning engine.crash workspace=ws_… exit_code=1`` — for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        fields = {k: v for k, v in record.__dict__.items() if k not in _STANDARD and k != "event"}
        line = f"{when} {record.levelname.lower():<7} {record.getMessage()}"
        if fields:
            line += " " + " ".join(f"{k}={_shown(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _shown(value: object) -> str:
    text = str(value)
    return json.dumps(text) if (" " in text or not text) else text


def resolve_format(fmt: str, *, is_terminal: bool) -> str:
    """``auto`` → ``text`` on a terminal, ``json`` otherwise; ``json`` and ``text`` stay as they are."""
    if fmt == "auto":
        return "text" if is_terminal else "json"
    return fmt


def configure(level: str, fmt: str) -> None:
    """Install the handler on the root logger (the composition root calls this once)."""
    handler = logging.StreamHandler(sys.stderr)
    if resolve_format(fmt, is_terminal=sys.stderr.isatty()) == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
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
