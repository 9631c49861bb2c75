"""The console and perf-test tools' pure parts: line parsing, record formatting, the consumers'
group settings and how they start reading (against a fake consumer), the producer perf test's
latency statistics (bounded sampling, percentiles, Kafka's output lines) and its send loop (against
a fake producer), the throughput throttle and the consumer perf test's rebalance timing."""

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
from services.clients.cli_perf import (
    RebalanceTimer,
    Stats,
    Throttler,
    consumer_perf_settings,
    consumer_summary,
    payload_bytes,
)
from services.clients.consumer.records import ConsumerRecords, RecordBlock
from services.common.topic_partition import TopicPartition


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


def ms_clock(start_ms: int = 1_700_000_000_000) -> FakeClock:
    clock = FakeClock()
    clock.now = start_ms
    return clock


def test_stats_summary_counts_every_record_of_each_batch():
    clock = ms_clock()
    out = io.StringIO()
    stats = Stats(1000, out, clock_ms=clock)
    start = clock.now
    for first in range(0, 1000, 100):  # ten batches; record i was sent at start + i % 100, acknowledged at +100
        stats.record_batch([start + i for i in range(100)], 100 * 100, start + 100 + first // 100)
    clock.now += 2000
    assert stats.summary() == ("1000 records sent, 500.000000 records/sec (0.05 MB/sec), 55.00 ms avg latency, "
                               "109.00 ms max latency, 55 ms 50th, 100 ms 95th, 106 ms 99th, 109 ms 99.9th.")
    assert out.getvalue() == ""


def test_stats_prints_a_window_line_every_interval():
    clock = ms_clock()
    out = io.StringIO()
    stats = Stats(10, out, reporting_interval_ms=5000, clock_ms=clock)
    start = clock.now
    stats.record_batch([start, start + 2], 200, start + 4000)  # latencies 4000 and 3998 ms
    assert out.getvalue() == ""
    stats.record_batch([start + 1000], 100, start + 5000)
    assert out.getvalue() == ("3 records sent, 0.6 records/sec (0.00 MB/sec), 3999.3 ms avg latency, "
                              "4000.0 ms max latency.\n")
    stats.record_batch([start + 5000], 100, start + 6000)
    assert out.getvalue().count("\n") == 1  # a new window started at +5000
    stats.record_batch([start + 9000], 100, start + 10000)
    assert out.getvalue().splitlines()[1] == ("2 records sent, 0.4 records/sec (0.00 MB/sec), 1000.0 ms avg latency, "
                                              "1000.0 ms max latency.")


def test_stats_samples_every_nth_acknowledged_record_across_batches():
    stats = Stats(2_000_000, io.StringIO(), clock_ms=ms_clock(0))
    assert (stats.sampling, stats.max_samples) == (4, 500_001)
    stats.record_batch([0, 1, 2, 3, 4, 5], 6, 100)  # records 0 and 4 of the run are sampled
    stats.record_batch([10, 11, 12], 3, 100)  # records 6, 7, 8: 8 is
    stats.record_batch([20], 1, 100)  # record 9 is not
    assert stats.latencies == [100, 96, 88]
    assert stats.count == 10 and stats.total_latency_ms == 1000 - 15 - 33 - 20 and stats.max_latency_ms == 100


def test_stats_keep_a_bounded_sample_whatever_arrives():
    stats = Stats(1000, io.StringIO(), clock_ms=ms_clock(0))
    assert (stats.sampling, stats.max_samples) == (1, 1001)
    for _ in range(30):  # three times the records announced
        stats.record_batch(list(range(100)), 100, 100)
    assert len(stats.latencies) == 1001 and stats.count == 3000
    small = Stats(0, io.StringIO(), clock_ms=ms_clock(0))
    assert small.summary().startswith("0 records sent, 0.000000 records/sec (0.00 MB/sec), 0.00 ms avg latency")


def test_stats_percentiles_index_the_sorted_sample_as_kafka_does():
    stats = Stats(10, io.StringIO(), clock_ms=ms_clock(0))
    stats.record_batch(list(range(10)), 10, 10)  # latencies 10, 9, ..., 1
    assert stats.percentiles(0.0, 0.5, 0.95, 0.99, 0.999) == [1, 6, 10, 10, 10]
    assert Stats(5, io.StringIO(), clock_ms=ms_clock(0)).percentiles(0.5) == [0]


class FakeProducer:
    """Takes sends and answers them in batches of `batch_records` to its batch listeners on flush."""

    instances: list[FakeProducer] = []
    fail_after: int | None = None

    def __init__(self, settings, clock=None):
        self.settings = settings
        self.listeners = []
        self.sent: list[tuple[str, bytes]] = []
        self.answered = 0
        self.closed = False
        FakeProducer.instances.append(self)

    def add_batch_listener(self, listener) -> None:
        self.listeners.append(listener)

    def send(self, topic, value, **kwargs) -> None:
        assert not kwargs and value.__class__ is bytes  # the plain path of Producer.send
        self.sent.append((topic, value))
        if self.fail_after is not None and len(self.sent) == self.fail_after:
            self.flush()

    def flush(self) -> None:
        from services.clients.producer import BatchResult

        while self.answered < len(self.sent):
            values = [value for _, value in self.sent[self.answered:self.answered + 100]]
            error = RuntimeError("refused") if self.fail_after is not None else None
            for listener in self.listeners:
                listener(BatchResult("perf", 0, self.answered, [1] * len(values), values, error))
            self.answered += len(values)

    def close(self) -> None:
        self.flush()
        self.closed = True

    def metrics(self) -> dict[str, float]:
        return {"record-send-total": float(self.answered)}


@pytest.fixture
def fake_producer(monkeypatch):
    FakeProducer.instances = []
    FakeProducer.fail_after = None
    monkeypatch.setattr("services.clients.producer.Producer", FakeProducer)
    return FakeProducer


def run_producer_perf_test(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    args = cli.build_parser().parse_args(["producer-perf-test", "--topic", "perf", "--bootstrap-server", "h:1",
                                          *argv])
    return args.run(args, out), out.getvalue()


def test_producer_perf_test_sends_every_record_and_prints_kafkas_summary(fake_producer):
    code, out = run_producer_perf_test("--num-records", "2500", "--record-size", "10", "--throughput", "-1",
                                       "--print-metrics")
    (producer,) = fake_producer.instances
    assert code == 0 and producer.closed and producer.settings["bootstrap.servers"] == "h:1"
    values = [value for _, value in producer.sent]
    assert len(values) == 2500 and all(len(v) == 10 and v.isalpha() and v.isupper() for v in values)
    assert len(set(values)) > 1000  # a pool of different payloads, sent in turn
    summary, metrics = out.splitlines()
    assert re.fullmatch(r"2500 records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, "
                        r"\d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.", summary)
    assert metrics == "record-send-total : 2500.0"


def test_producer_perf_test_picks_payload_file_lines_and_stops_at_the_first_failure(fake_producer, tmp_path,
                                                                                     capsys):
    payload_file = tmp_path / "payloads.txt"
    payload_file.write_bytes(b"alpha\nbeta\n\ngamma\n")
    fake_producer.fail_after = 10
    code, out = run_producer_perf_test("--num-records", "5000", "--payload-file", str(payload_file),
                                       "--throughput", "-1")
    (producer,) = fake_producer.instances
    assert code == 1 and len(producer.sent) < 5000
    assert {value for _, value in producer.sent} <= {b"alpha", b"beta", b"gamma"}
    assert out.startswith("0 records sent, ")
    assert capsys.readouterr().err.count("Error: refused") == 1


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
    assert Throttler(-1, start=0.0).chunk_records() == 1000
    assert Throttler(50_000, start=0.0).chunk_records() == 500  # a look at the throttle every 10 ms
    assert Throttler(10, start=0.0).chunk_records() == 1


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


def test_consumer_perf_test_counts_key_and_value_bytes_with_nulls_as_zero():
    tp = TopicPartition("t", 0)
    block = RecordBlock("t", 0, 0, None, range(3), [1, 2, 3], [b"k", None, b"kk"], [b"abc", b"de", None],
                        key_sizes=[1, -1, 2], value_sizes=[3, 2, -1])
    plain = RecordBlock("t", 0, 0, None, range(3, 5), [4, 5], None, [b"x" * 10, b"y" * 20])
    assert payload_bytes(ConsumerRecords({tp: [block, plain]})) == (5, 1 + 2 + 3 + 2 + 10 + 20)
    assert payload_bytes(ConsumerRecords()) == (0, 0)


def test_consumer_summary_splits_the_run_into_rebalance_and_fetch_time():
    line = consumer_summary(1_700_000_000.0, 2.0, 0.5, 3000, 3 * 1024 * 1024)
    fields = [field.strip() for field in line.split(",")]
    assert fields[2:] == ["3.0000", "1.5000", "3000", "1500.0000", "500", "1500", "2.0000", "2000.0000"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
