"""Structured logging for services: one JSON object per line (or plain text) to stderr or a file.

`configure_logging(service, level=None, json=True, path=None, stream=None)` installs one handler
on the root logger, replacing the one a previous call installed, so calling it again (tests,
reconfiguration) never duplicates lines. The level is `ODRADEK_LOG_LEVEL` when set, else
`level`, else INFO; names (`"debug"`, `"WARNING"`) and numbers are accepted.

A JSON line holds:

    ts       UTC time of the event, ISO 8601 with milliseconds: "2024-05-01T12:00:00.123Z"
    level    "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL"
    logger   the logger's name
    service  the `service` given to configure_logging
    message  the formatted message
    exc      the formatted traceback, only when exception info is attached
    ...      every `extra={...}` field of the call, values that JSON cannot hold as their str()

The text format is `ts LEVEL service logger: message key=value ...` for people at a terminal.
"""

from __future__ import annotations

import json as jsonlib
import logging
import os
import sys
from datetime import UTC, datetime
from typing import IO, Any

LOG_LEVEL_ENV = "ODRADEK_LOG_LEVEL"
# The `event` field of the line a broker logs when it starts or stops leading a partition (with
# `broker`, `topic`, `partition`, `leader`, `leader_epoch`): fault checks read leadership from it.
LEADERSHIP_EVENT = "leadership"

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
_HANDLER_MARK = "_odradek_handler"


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRIBUTES and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """Formats a record as a single-line JSON object (see the module docstring for its fields)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "service": self.service,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        for key, value in _extra_fields(record).items():
            entry.setdefault(key, value)
        return jsonlib.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Formats a record as `ts LEVEL service logger: message key=value ...` plus any traceback."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {self.service} {record.name}: {record.getMessage()}"
        extras = _extra_fields(record)
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


def resolve_level(level: str | int | None = None) -> int:
    """The effective level: ODRADEK_LOG_LEVEL if set, else `level`, else INFO."""
    chosen: str | int | None = os.environ.get(LOG_LEVEL_ENV) or level
    if chosen is None:
        return logging.INFO
    if isinstance(chosen, int):
        return chosen
    text = chosen.strip().upper()
    if text.isdigit():
        return int(text)
    number = logging.getLevelName(text)
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {chosen!r}")
    return number


def configure_logging(
    service: str,
    level: str | int | None = None,
    json: bool = True,
    *,
    path: str | os.PathLike[str] | None = None,
    stream: IO[str] | None = None,
) -> logging.Handler:
    """Send all logging to stderr (or `path`, or `stream`) as JSON lines or text; return the handler."""
    handler: logging.Handler
    if path is not None:
        handler = logging.FileHandler(path, encoding="utf-8")
    else:
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter(service) if json else TextFormatter(service))
    setattr(handler, _HANDLER_MARK, True)

    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _HANDLER_MARK, False):
            root.removeHandler(old)
            old.close()
    root.addHandler(handler)
    root.setLevel(resolve_level(level))
    logging.captureWarnings(True)
    return handler
