"""Tests for services.common.logging_setup."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common.logging_setup import LOG_LEVEL_ENV, configure_logging, resolve_level

TS_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


@pytest.fixture(autouse=True)
def restore_root_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    logging.captureWarnings(False)


def lines_of(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_has_the_standard_fields() -> None:
    stream = io.StringIO()
    configure_logging("broker", stream=stream)
    logging.getLogger("services.broker.log").info("rolled segment %d", 42)
    [entry] = lines_of(stream)
    assert entry["level"] == "INFO"
    assert entry["logger"] == "services.broker.log"
    assert entry["service"] == "broker"
    assert entry["message"] == "rolled segment 42"
    assert TS_PATTERN.fullmatch(entry["ts"])


def test_extra_fields_are_included_and_made_serialisable() -> None:
    stream = io.StringIO()
    configure_logging("broker", stream=stream)
    logging.getLogger("x").warning(
        "isr shrink", extra={"topic": "t", "partition": 3, "isr": [1, 2], "path": Path("/d")}
    )
    [entry] = lines_of(stream)
    assert entry["topic"] == "t"
    assert entry["partition"] == 3
    assert entry["isr"] == [1, 2]
    assert entry["path"] == "/d"


def test_exception_is_formatted_into_the_line() -> None:
    stream = io.StringIO()
    configure_logging("controller", stream=stream)
    try:
        raise RuntimeError("zk session expired")
    except RuntimeError:
        logging.getLogger("c").exception("election failed")
    [entry] = lines_of(stream)
    assert entry["level"] == "ERROR"
    assert "RuntimeError: zk session expired" in entry["exc"]


def test_one_object_per_line_even_with_newlines_in_message() -> None:
    stream = io.StringIO()
    configure_logging("gateway", stream=stream)
    logging.getLogger("g").info("two\nlines \u00e9")
    [entry] = lines_of(stream)
    assert entry["message"] == "two\nlines \u00e9"


def test_level_argument_filters() -> None:
    stream = io.StringIO()
    configure_logging("broker", level="warning", stream=stream)
    log = logging.getLogger("lvl")
    log.info("hidden")
    log.warning("shown")
    assert [e["message"] for e in lines_of(stream)] == ["shown"]


def test_environment_level_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOG_LEVEL_ENV, "DEBUG")
    stream = io.StringIO()
    configure_logging("broker", level="ERROR", stream=stream)
    logging.getLogger("env").debug("visible")
    assert [e["message"] for e in lines_of(stream)] == ["visible"]


def test_resolve_level() -> None:
    assert resolve_level() == logging.INFO
    assert resolve_level("error") == logging.ERROR
    assert resolve_level(logging.DEBUG) == logging.DEBUG
    assert resolve_level("15") == 15
    with pytest.raises(ValueError):
        resolve_level("LOUD")


def test_reconfiguring_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("broker", stream=first)
    configure_logging("broker", stream=second)
    logging.getLogger("r").info("once")
    assert first.getvalue() == ""
    assert len(lines_of(second)) == 1


def test_text_format() -> None:
    stream = io.StringIO()
    configure_logging("coordinator", json=False, stream=stream)
    logging.getLogger("services.coordinator.group").info("joined", extra={"group": "g1"})
    line = stream.getvalue().strip()
    assert re.fullmatch(
        TS_PATTERN.pattern + r" INFO coordinator services\.coordinator\.group: joined group=g1", line
    )


def test_file_output(tmp_path: Path) -> None:
    path = tmp_path / "broker.log"
    handler = configure_logging("broker", path=path)
    logging.getLogger("f").info("to file")
    handler.flush()
    [entry] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert entry["message"] == "to file"
    assert entry["service"] == "broker"
