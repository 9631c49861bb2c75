"""The console and perf-test tools' pure parts: line parsing, record formatting, the latency
statistics and the throughput throttle."""

from __future__ import annotations

import argparse
import io
from types import SimpleNamespace

import pytest

from services.clients import cli
from services.clients.cli_console import LineReader, RecordFormatter, parse_key_values, starting_point
from services.clients.cli_perf import Stats, Throttler


def record(**fields):
    base = dict(topic="t", partition=2, offset=7, timestamp=1700000000000, timestamp_type=0, key=b"k",
                value=b"v", headers=())
    base.update(fields)
    return SimpleNamespace(**base)


def test_line_reader_without_keys_takes_whole_lines():
    reader = LineReader({})
    assert reader.parse(b"a:b") == (None, b"a:b")


def test_line_reader_splits_key_at_the_first_separator():
    reader = LineReader({"parse.key": "true", "key.separator": ":"})
    assert reader.parse(b"user1:hello:world") == (b"user1", b"hello:world")
    assert reader.parse(b":empty-key") == (b"", b"empty-key")


def test_line_reader_default_separator_is_a_tab_and_escapes_are_read():
    assert LineReader({"parse.key": "true"}).parse(b"k\tv") == (b"k", b"v")
    assert LineReader({"parse.key": "true", "key.separator": "\\t"}).parse(b"k\tv") == (b"k", b"v")


def test_line_reader_missing_separator_is_an_error_naming_the_line():
    reader = LineReader({"parse.key": "true", "key.separator": ":"})
    reader.parse(b"a:b")
    with pytest.raises(ValueError, match="No key separator found on line number 2: 'no separator'"):
        reader.parse(b"no separator")


def test_line_reader_ignore_error_and_null_marker():
    reader = LineReader({"parse.key": "true", "key.separator": ":", "ignore.error": "true",
                         "null.marker": "NULL"})
    assert reader.parse(b"plain") == (None, b"plain")
    assert reader.parse(b"NULL:v") == (None, b"v")
    assert reader.parse(b"k:NULL") == (b"k", None)


def test_formatter_prints_the_value_by_default():
    assert RecordFormatter({}).format(record()) == "v\n"
    assert RecordFormatter({}).format(record(value=None)) == "null\n"


def test_formatter_prints_requested_fields_in_kafka_order():
    formatter = RecordFormatter({"print.key": "true", "print.offset": "true", "print.partition": "true",
                                 "print.timestamp": "true", "print.headers": "true", "key.separator": "|"})
    line = formatter.format(record(headers=(("h", b"1"), ("n", None))))
    assert line == "CreateTime:1700000000000|Partition:2|Offset:7|h:1,n:null|k|v\n"
    assert RecordFormatter({"print.headers": "true"}).format(record()) == "NO_HEADERS\tv\n"
    assert RecordFormatter({"print.timestamp": "true"}).format(record(timestamp_type=1)).startswith(
        "LogAppendTime:1700000000000\t")


def test_parse_key_values_rejects_missing_equals():
    assert parse_key_values(["a=1", "b=x=y"], "--property") == {"a": "1", "b": "x=y"}
    with pytest.raises(argparse.ArgumentTypeError, match="--property expects KEY=VALUE"):
        parse_key_values(["oops"], "--property")


def test_starting_point():
    def args(**kw):
        return SimpleNamespace(**{"offset": None, "from_beginning": False, **kw})

    assert starting_point(args()) == "latest"
    assert starting_point(args(from_beginning=True)) == "earliest"
    assert starting_point(args(offset="42")) == 42
    assert starting_point(args(offset="Earliest")) == "earliest"


def test_console_consumer_rejects_offset_without_partition():
    with pytest.raises(SystemExit, match="The partition is required when offset is specified."):
        cli.main(["console-consumer", "--bootstrap-server", "h:1", "--topic", "t", "--offset", "3"])
    with pytest.raises(SystemExit, match="is incorrect"):
        cli.main(["console-consumer", "--bootstrap-server", "h:1", "--topic", "t", "--partition", "0",
                  "--offset", "soon"])


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_stats_summary_has_throughput_latency_and_percentiles():
    clock = FakeClock()
    out = io.StringIO()
    stats = Stats(1000, out, clock=clock)
    for i in range(1000):
        stats.record(i, float(i % 100), 100, clock.now)
    clock.now += 2.0
    summary = stats.summary()
    assert summary.startswith("1000 records sent, 500.0 records/sec (0.05 MB/sec), 49.50 ms avg latency, "
                              "99.00 ms max latency, 50 ms 50th, 95 ms 95th, 99 ms 99th, 99 ms 99.9th.")
    assert out.getvalue() == ""


def test_stats_prints_a_window_line_every_interval():
    clock = FakeClock()
    out = io.StringIO()
    stats = Stats(10, out, reporting_interval_ms=5000, clock=clock)
    stats.record(0, 4.0, 100, clock.now + 1)
    stats.record(1, 6.0, 100, clock.now + 5)
    assert out.getvalue() == ("2 records sent, 0.4 records/sec (0.00 MB/sec), 5.0 ms avg latency, "
                              "6.0 ms max latency.\n")
    stats.record(2, 1.0, 100, clock.now + 6)
    assert out.getvalue().count("\n") == 1


def test_stats_samples_latencies_of_large_runs():
    stats = Stats(2_000_000, io.StringIO(), clock=FakeClock())
    assert stats.sampling == 4
    for i in range(8):
        stats.record(i, 1.0, 1, 100.0)
    assert len(stats.latencies) == 2


def test_throttler_sleeps_only_when_ahead(monkeypatch):
    slept = []
    monkeypatch.setattr("services.clients.cli_perf.time.sleep", slept.append)
    clock = FakeClock()
    throttler = Throttler(100.0, start=clock.now, clock=clock)
    throttler.throttle(50)  # 50 records at 100/s are due at +0.5 s
    assert slept == [pytest.approx(0.5)]
    clock.now += 1.0
    throttler.throttle(60)
    assert len(slept) == 1
    Throttler(-1, start=0.0, clock=clock).throttle(10 ** 9)
    assert len(slept) == 1
