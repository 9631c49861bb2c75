"""The console and perf-test tools' pure parts: line parsing, record formatting, the consumers'
group settings and how they start reading (against a fake consumer), the latency statistics, the
throughput throttle and the consumer perf test's rebalance timing."""

from __future__ import annotations

import argparse
import io
import re
from types import SimpleNamespace

import pytest

from services.clients import cli
from services.clients.cli_console import (
    LineReader,
    RecordFormatter,
    consumer_settings,
    parse_key_values,
    print_records,
    start_reading,
    starting_point,
)
from services.clients.cli_perf import RebalanceTimer, Stats, Throttler, consumer_perf_settings, consumer_summary
from services.clients.cluster import TopicPartition


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


def console_args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["console-consumer", "--bootstrap-server", "h:1", *argv])


def test_console_consumer_joins_the_named_group_and_commits_by_default():
    settings = consumer_settings(console_args("--topic", "t", "--group", "readers"))
    assert settings["group.id"] == "readers"
    assert "enable.auto.commit" not in settings  # the consumer's default: true
    assert settings["auto.offset.reset"] == "latest"
    assert settings["bootstrap.servers"] == "h:1"
    assert consumer_settings(console_args("--topic", "t", "--from-beginning"))["auto.offset.reset"] == "earliest"


def test_console_consumer_without_a_group_gets_a_random_one_that_commits_nothing():
    settings = consumer_settings(console_args("--topic", "t"))
    assert re.fullmatch(r"console-consumer-\d{5}", settings["group.id"])
    assert settings["enable.auto.commit"] == "false"
    kept = consumer_settings(console_args("--topic", "t", "--consumer-property", "enable.auto.commit=true"))
    assert kept["enable.auto.commit"] == "true"


def test_console_consumer_group_may_come_from_a_property_or_the_config_file(tmp_path):
    config = tmp_path / "consumer.properties"
    config.write_text("group.id=from-file\nmax.poll.records=7\n")
    settings = consumer_settings(console_args("--topic", "t", "--consumer.config", str(config)))
    assert (settings["group.id"], settings["max.poll.records"]) == ("from-file", "7")
    assert "enable.auto.commit" not in settings
    same = consumer_settings(console_args("--topic", "t", "--group", "from-file", "--consumer.config", str(config),
                                          "--consumer-property", "group.id=from-file"))
    assert same["group.id"] == "from-file"
    with pytest.raises(ValueError, match="do not match. Detected group ids: 'g', 'from-file'"):
        consumer_settings(console_args("--topic", "t", "--group", "g", "--consumer.config", str(config)))


def test_console_consumer_from_beginning_conflicts_with_another_reset_policy():
    with pytest.raises(ValueError, match="--from-beginning and 'auto.offset.reset=latest'"):
        consumer_settings(console_args("--topic", "t", "--from-beginning",
                                       "--consumer-property", "auto.offset.reset=latest"))
    settings = consumer_settings(console_args("--topic", "t", "--consumer-property", "auto.offset.reset=earliest"))
    assert settings["auto.offset.reset"] == "earliest"


def test_console_consumer_needs_exactly_one_of_topic_and_include():
    for argv in ([], ["--topic", "t", "--include", "t.*"]):
        with pytest.raises(SystemExit, match="Exactly one of --include/--topic is required."):
            cli.main(["console-consumer", "--bootstrap-server", "h:1", *argv])
    with pytest.raises(SystemExit, match="The topic is required when partition is specified."):
        cli.main(["console-consumer", "--bootstrap-server", "h:1", "--include", "t.*", "--partition", "0"])


class FakeConsumer:
    """Records how a tool drives the consumer; `batches` are what successive polls return."""

    def __init__(self, batches=()):
        self.calls: list[tuple] = []
        self.batches = list(batches)

    def subscribe(self, topics=None, pattern=None, listener=None):
        self.calls.append(("subscribe", topics, pattern))

    def assign(self, partitions):
        self.calls.append(("assign", list(partitions)))

    def seek(self, partition, offset):
        self.calls.append(("seek", partition, offset))

    def seek_to_beginning(self, *partitions):
        self.calls.append(("seek_to_beginning", *partitions))

    def seek_to_end(self, *partitions):
        self.calls.append(("seek_to_end", *partitions))

    def poll(self, timeout_ms=0):
        return self.batches.pop(0) if self.batches else []


def test_console_consumer_subscribes_to_the_topic_or_the_pattern():
    consumer = FakeConsumer()
    start_reading(consumer, console_args("--topic", "t", "--group", "g"))
    start_reading(consumer, console_args("--include", "logs-.*"))
    start_reading(consumer, console_args("--whitelist", "old-.*"))
    assert consumer.calls == [("subscribe", ["t"], None), ("subscribe", None, "logs-.*"),
                              ("subscribe", None, "old-.*")]


def test_console_consumer_with_a_partition_assigns_and_seeks():
    tp = TopicPartition("t", 1)
    for argv, seek in ((["--group", "g"], ("seek_to_end", tp)),
                       (["--from-beginning"], ("seek_to_beginning", tp)),
                       (["--offset", "earliest"], ("seek_to_beginning", tp)),
                       (["--offset", "5"], ("seek", tp, 5))):
        consumer = FakeConsumer()
        start_reading(consumer, console_args("--topic", "t", "--partition", "1", *argv))
        assert consumer.calls == [("assign", [tp]), seek]


def test_max_messages_inside_a_batch_moves_back_to_the_records_not_printed():
    batch = [record(partition=p, offset=o, value=b"%d-%d" % (p, o)) for p, o in ((0, 3), (0, 4), (1, 8), (0, 5),
                                                                                  (1, 9))]
    consumer = FakeConsumer([batch])
    out = io.StringIO()
    processed = print_records(consumer, RecordFormatter({}), console_args("--topic", "t", "--max-messages", "2"),
                               out)
    assert (processed, out.getvalue()) == (2, "0-3\n0-4\n")
    assert consumer.calls == [("seek", TopicPartition("t", 1), 8), ("seek", TopicPartition("t", 0), 5)]
    consumer = FakeConsumer([batch[:2]])
    assert print_records(consumer, RecordFormatter({}), console_args("--topic", "t", "--max-messages", "2"),
                          io.StringIO()) == 2
    assert consumer.calls == []


def perf_args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["consumer-perf-test", "--bootstrap-server", "h:1", "--topic", "t",
                                          "--messages", "10", *argv])


def test_consumer_perf_test_joins_a_group(tmp_path):
    settings = consumer_perf_settings(perf_args())
    assert re.fullmatch(r"perf-consumer-\d{5}", settings["group.id"])
    assert settings["auto.offset.reset"] == "earliest"
    assert consumer_perf_settings(perf_args("--group", "perf", "--from-latest"))["group.id"] == "perf"
    assert consumer_perf_settings(perf_args("--from-latest"))["auto.offset.reset"] == "latest"
    config = tmp_path / "consumer.properties"
    config.write_text("group.id=configured\n")
    assert consumer_perf_settings(perf_args("--consumer.config", str(config)))["group.id"] == "configured"
    assert consumer_perf_settings(perf_args("--consumer.config", str(config), "--group", "g"))["group.id"] == "g"


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


def test_rebalance_timer_adds_up_the_time_from_each_revocation_to_the_next_assignment():
    clock = FakeClock()
    timer = RebalanceTimer(clock=clock)
    clock.now += 0.25
    timer.on_partitions_assigned([])
    clock.now += 5.0
    timer.on_partitions_revoked([])
    clock.now += 0.5
    timer.on_partitions_assigned([])
    assert timer.rebalance_s == pytest.approx(0.75)


def test_consumer_summary_splits_the_run_into_rebalance_and_fetch_time():
    line = consumer_summary(1_700_000_000.0, 2.0, 0.5, 3000, 3 * 1024 * 1024)
    fields = [field.strip() for field in line.split(",")]
    assert fields[2:] == ["3.0000", "1.5000", "3000", "1500.0000", "500", "1500", "2.0000", "2000.0000"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
