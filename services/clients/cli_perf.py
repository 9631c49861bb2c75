"""`odradek producer-perf-test` and `odradek consumer-perf-test`: Kafka's load-testing tools.

    odradek producer-perf-test --topic T --num-records N (--record-size S | --payload-file F)
        --throughput R [--producer-props k=v ...] [--producer.config FILE] [--bootstrap-server B]
    odradek consumer-perf-test --bootstrap-server B --topic T --messages N [--group G] [--from-latest]
        [--timeout MS] [--show-detailed-stats] [--reporting-interval MS] [--hide-header]

The producer test sends N records of random upper-case letters (or lines of a payload file), at most R
records/s (-1: no limit), and measures each record's latency from send() to its acknowledgement. Every
5 s it prints `N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.` and at the
end the same over the whole run followed by the 50th, 95th, 99th and 99.9th percentiles, as Kafka's
ProducerPerformance (which keeps a bounded sample of latencies for those). It must cost no more than
the producer it measures: records go through the plain `send` (no callback), each one's send time is
its timestamp, and a batch listener of the producer accounts for a whole batch at its acknowledgement.

The consumer test joins group G (default `perf-consumer-NNNNN`, five random digits; a `group.id` of
--consumer.config is kept when --group is absent), subscribes to the topic, reads N records starting
where the group committed (else at the earliest offset, or the latest with --from-latest), and prints
Kafka's ConsumerPerformance CSV line: start, end, MB, MB/s, records, records/s, the time spent in
rebalances (from the start or a revocation to the next assignment) and the rest of the run as fetch
time with the throughput over it. --timeout counts from the start, so a slow first rebalance ends
the run as an idle topic does.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import operator
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TextIO

from services.clients.cli_console import client_settings, random_group_id
from services.common.clock import SYSTEM_CLOCK
from services.common.config import ConfigError
from services.common.errors import KafkaError

REPORTING_INTERVAL_MS = 5000
MAX_LATENCY_SAMPLES = 500000
CHUNK_RECORDS = 1000  # records sent between two looks at the throttle and at failures
THROTTLE_STEP_S = 0.01
PAYLOAD_POOL_RECORDS = 1024
PAYLOAD_POOL_BYTES = 16 * 1024 * 1024
UPPER_CASE = bytes(ord("A") + byte % 26 for byte in range(256))  # a translate table: any byte -> a letter
MB = 1024 * 1024
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S:%f"
KEY_SIZE = operator.attrgetter("serialized_key_size")
VALUE_SIZE = operator.attrgetter("serialized_value_size")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    _add_producer_perf_parser(subparsers)
    _add_consumer_perf_parser(subparsers)


# --------------------------------------------------------------------------------------------- producer

def _add_producer_perf_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("producer-perf-test", help="measure producer throughput and latency",
                                   description="Send records as fast as allowed and report throughput "
                                               "and latency.")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--num-records", type=int, required=True)
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, help="bytes of each record")
    payload.add_argument("--payload-file", help="a file whose lines are the payloads, picked at random")
    parser.add_argument("--payload-delimiter", default="\\n", help=argparse.SUPPRESS)
    parser.add_argument("--throughput", type=float, required=True, help="records/s at most; -1 for no limit")
    parser.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE",
                        help="producer configs, e.g. bootstrap.servers=h:9092 acks=all")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                        help="a properties file of producer configs")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="shorthand for --producer-props bootstrap.servers=HOST:PORT")
    parser.add_argument("--print-metrics", action="store_true", help="print the producer's metrics at the end")
    parser.set_defaults(run=run_producer_perf, check=check_producer_perf)


def check_producer_perf(args: argparse.Namespace) -> None:
    if args.num_records < 0:
        sys.exit("--num-records must be non-negative")
    if args.record_size is not None and args.record_size <= 0:
        sys.exit("--record-size must be positive")


class Stats:
    """ProducerPerformance's bookkeeping. Every record's latency (whole ms, from its send to its
    acknowledgement, on the wall clock of record timestamps) counts in the totals and in the window
    printed every `reporting_interval_ms`; for the percentiles every `sampling`-th acknowledged
    record's latency is kept, `sampling` chosen so that at most MAX_LATENCY_SAMPLES (+1) are. Records
    are counted a batch at a time with no Python code run per record: a batch's sampled send times
    are kept as one slice beside its acknowledgement time, and turned into latencies only for the
    percentiles, after the run (as Kafka's tool sorts its sample then)."""

    def __init__(self, num_records: int, out: TextIO, reporting_interval_ms: int = REPORTING_INTERVAL_MS,
                 clock_ms: Callable[[], int] = SYSTEM_CLOCK.time_ms):
        self.clock_ms = clock_ms
        self.out = out
        self.start_ms = clock_ms()
        self.sampling = max(1, num_records // min(max(num_records, 1), MAX_LATENCY_SAMPLES))
        self.max_samples = num_records // self.sampling + 1
        self._sampled: list[tuple[int, Sequence[int]]] = []
        self.sample_count = 0
        self.iteration = 0
        self.count = 0
        self.bytes = 0
        self.total_latency_ms = 0
        self.max_latency_ms = 0
        self.reporting_interval_ms = reporting_interval_ms
        self._window_reset(self.start_ms)

    def _window_reset(self, now_ms: int) -> None:
        self.window_start_ms = now_ms
        self.window_count = 0
        self.window_bytes = 0
        self.window_total_latency_ms = 0
        self.window_max_latency_ms = 0

    def record_batch(self, sent_ms: Sequence[int], size: int, now_ms: int) -> None:
        """Counts records sent at `sent_ms` (a list, in send order) and acknowledged at `now_ms`,
        `size` bytes of payload in all."""
        count = len(sent_ms)
        if not count:
            return
        total_latency_ms = count * now_ms - sum(sent_ms)
        max_latency_ms = now_ms - min(sent_ms)
        self.count += count
        self.bytes += size
        self.total_latency_ms += total_latency_ms
        self.max_latency_ms = max(self.max_latency_ms, max_latency_ms)
        self.window_count += count
        self.window_bytes += size
        self.window_total_latency_ms += total_latency_ms
        self.window_max_latency_ms = max(self.window_max_latency_ms, max_latency_ms)
        room = self.max_samples - self.sample_count
        if room > 0:  # the send times of the sampled records, kept with their acknowledgement time
            sampled = sent_ms[-self.iteration % self.sampling::self.sampling]
            if len(sampled) > room:
                sampled = sampled[:room]
            self._sampled.append((now_ms, sampled))
            self.sample_count += len(sampled)
        self.iteration += count
        if now_ms - self.window_start_ms >= self.reporting_interval_ms:
            print(self.window_line(now_ms), file=self.out, flush=True)
            self._window_reset(now_ms)

    def window_line(self, now_ms: int) -> str:
        elapsed_ms = max(now_ms - self.window_start_ms, 1)
        count = max(self.window_count, 1)
        return (f"{self.window_count} records sent, {1000 * self.window_count / elapsed_ms:.1f} records/sec "
                f"({1000 * self.window_bytes / elapsed_ms / MB:.2f} MB/sec), "
                f"{self.window_total_latency_ms / count:.1f} ms avg latency, "
                f"{self.window_max_latency_ms:.1f} ms max latency.")

    @property
    def latencies(self) -> list[int]:
        """The sampled latencies (ms), in the order the records were acknowledged."""
        return [now_ms - at for now_ms, sent_ms in self._sampled for at in sent_ms]

    def percentiles(self, *quantiles: float) -> list[int]:
        ordered = sorted(self.latencies)
        if not ordered:
            return [0 for _ in quantiles]
        return [ordered[int(q * len(ordered))] for q in quantiles]

    def summary(self) -> str:
        elapsed_ms = max(self.clock_ms() - self.start_ms, 1)
        count = max(self.count, 1)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        return (f"{self.count} records sent, {1000 * self.count / elapsed_ms:f} records/sec "
                f"({1000 * self.bytes / elapsed_ms / MB:.2f} MB/sec), {self.total_latency_ms / count:.2f} ms avg "
                f"latency, {self.max_latency_ms:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
                f"{p99} ms 99th, {p999} ms 99.9th.")


class Throttler:
    """Keeps a sender at `target_per_s` (no limit when negative), sleeping when it runs ahead."""

    def __init__(self, target_per_s: float, start: float, clock: Callable[[], float] = time.monotonic):
        self.target_per_s = target_per_s
        self.start = start
        self.clock = clock

    def throttle(self, sent: int) -> None:
        if self.target_per_s < 0:
            return
        if self.target_per_s == 0:
            time.sleep(3600)
            return
        ahead_s = sent / self.target_per_s - (self.clock() - self.start)
        if ahead_s > 0.001:
            time.sleep(ahead_s)

    def chunk_records(self) -> int:
        """Records to send between two checks: CHUNK_RECORDS, or fewer when throttled, so that the
        sender sleeps at least every THROTTLE_STEP_S."""
        if self.target_per_s < 0:
            return CHUNK_RECORDS
        return max(1, min(CHUNK_RECORDS, int(self.target_per_s * THROTTLE_STEP_S)))


def payloads(args: argparse.Namespace) -> list[bytes]:
    """The payloads to send: random upper-case letters of --record-size bytes (a pool of up to
    PAYLOAD_POOL_RECORDS different ones, PAYLOAD_POOL_BYTES in all, sent in turn), or the lines of
    --payload-file (picked at random)."""
    if args.record_size is not None:
        rng = random.Random()
        pool_records = max(1, min(PAYLOAD_POOL_RECORDS, PAYLOAD_POOL_BYTES // args.record_size, args.num_records))
        return [rng.randbytes(args.record_size).translate(UPPER_CASE) for _ in range(pool_records)]
    with open(args.payload_file, "rb") as f:
        text = f.read()
    delimiter = args.payload_delimiter.encode("utf-8").decode("unicode_escape").encode("utf-8")
    lines = [line for line in text.split(delimiter) if line]
    if not lines:
        raise ValueError(f"File does not contain any payload: {args.payload_file}")
    print(f"Reading payloads from: {args.payload_file}", file=sys.stderr)
    print(f"Number of messages read: {len(lines)}", file=sys.stderr)
    return lines


def payload_source(args: argparse.Namespace, bodies: list[bytes]) -> Callable[[int], Iterable[bytes]]:
    """`take(n)`: the next n payloads, the pool of --record-size in turn or file lines at random."""
    if args.record_size is not None:
        return functools.partial(itertools.islice, itertools.cycle(bodies))
    pick = random.Random().choices
    return lambda count: pick(bodies, k=count)


def producer_perf_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = client_settings(args, args.producer_config, args.producer_props, "--producer-props")
    if "bootstrap.servers" not in settings:
        raise ConfigError("bootstrap.servers", None, "give --bootstrap-server or --producer-props "
                                                     "bootstrap.servers=HOST:PORT")
    return settings


def run_producer_perf(args: argparse.Namespace, out: TextIO) -> int:
    from services.clients.producer import Producer

    try:
        bodies = payloads(args)
        producer = Producer(producer_perf_settings(args))
    except (argparse.ArgumentTypeError, ConfigError, KafkaError, ValueError, OSError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    stats = Stats(args.num_records, out)
    failures: list[BaseException] = []
    clock_ms = stats.clock_ms
    record_size = args.record_size  # every payload has it, unless they are lines of a file

    def on_batch(result) -> None:  # on the producer's sender thread, once per answered batch
        if result.error is not None:
            if not failures:
                failures.append(result.error)
                print(f"Error: {result.error}", file=sys.stderr)
            return
        values = result.values
        size = len(values) * record_size if record_size is not None else sum(map(len, values))
        stats.record_batch(result.timestamps, size, clock_ms())

    producer.add_batch_listener(on_batch)
    throttler = Throttler(args.throughput, time.monotonic())
    take = payload_source(args, bodies)
    chunk = throttler.chunk_records()
    send = producer.send
    topic = args.topic
    try:
        sent = 0
        while sent < args.num_records and not failures:
            count = min(chunk, args.num_records - sent)
            for body in take(count):  # each record's send time is its timestamp, taken by send()
                send(topic, body)
            sent += count
            throttler.throttle(sent)
        producer.flush()
    except KafkaError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    finally:
        producer.close()  # as Kafka's tool: every batch is accounted for before the total is printed
        print(stats.summary(), file=out, flush=True)
        if args.print_metrics:
            for name, value in sorted(producer.metrics().items()):
                print(f"{name} : {value}", file=out)
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------- consumer

def _add_consumer_perf_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("consumer-perf-test", help="measure consumer throughput",
                                   description="Read records as fast as possible and report throughput.")
    parser.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", required=True,
                        metavar="HOST:PORT", help="the broker(s) to connect to (--broker-list: Kafka's older name)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True, help="records to read")
    parser.add_argument("--group", help="the consumer group id (default perf-consumer-<5 random digits>)")
    parser.add_argument("--fetch-size", type=int, default=1048576, help="max.partition.fetch.bytes")
    parser.add_argument("--from-latest", action="store_true",
                        help="without a committed offset, start at the latest offset rather than the earliest")
    parser.add_argument("--timeout", type=int, default=10000, metavar="MS",
                        help="give up when no record came for this long")
    parser.add_argument("--show-detailed-stats", action="store_true", help="print a line every interval")
    parser.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    parser.add_argument("--hide-header", action="store_true")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="FILE")
    parser.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                        help=argparse.SUPPRESS)
    parser.add_argument("--print-metrics", action="store_true")
    parser.set_defaults(run=run_consumer_perf)


def consumer_perf_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = {"max.partition.fetch.bytes": str(args.fetch_size),
                "auto.offset.reset": "latest" if args.from_latest else "earliest"}
    settings.update(client_settings(args, args.consumer_config, args.consumer_property, "--consumer-property"))
    if args.group:
        settings["group.id"] = args.group
    elif not settings.get("group.id"):
        settings["group.id"] = random_group_id("perf-consumer-")
    return settings


class RebalanceTimer:
    """A rebalance listener adding up the time from the start, or from each revocation, to the next
    assignment: the rebalance time of ConsumerPerformance."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.rebalance_start = clock()
        self.rebalance_s = 0.0

    def on_partitions_revoked(self, partitions: list) -> None:
        self.rebalance_start = self.clock()

    def on_partitions_assigned(self, partitions: list) -> None:
        self.rebalance_s += self.clock() - self.rebalance_start


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at).strftime(DATE_FORMAT)[:-3]


def run_consumer_perf(args: argparse.Namespace, out: TextIO) -> int:
    from services.clients.consumer import Consumer

    try:
        consumer = Consumer(consumer_perf_settings(args))
    except (argparse.ArgumentTypeError, ConfigError, KafkaError, OSError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    try:
        if not args.hide_header:
            print(DETAILED_HEADER if args.show_detailed_stats else CONSUMER_HEADER, file=out)
        start_wall = time.time()
        start = time.monotonic()
        timer = RebalanceTimer()
        consumer.subscribe([args.topic], listener=timer)
        count, size = _consume(consumer, args, out, start)
        elapsed = max(time.monotonic() - start, 1e-9)
        print(consumer_summary(start_wall, elapsed, timer.rebalance_s, count, size), file=out)
        if args.print_metrics:
            for name, value in sorted(consumer.metrics().items()):
                print(f"{name} : {value}", file=out)
    except KafkaError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    finally:
        consumer.close()
    return 0


def consumer_summary(start_wall: float, elapsed_s: float, rebalance_s: float, count: int, size: int) -> str:
    """ConsumerPerformance's CSV line; fetch time is the run's time outside rebalances."""
    megabytes = size / MB
    elapsed_s = max(elapsed_s, 1e-9)
    fetch_s = max(elapsed_s - rebalance_s, 1e-9)
    return (f"{_stamp(start_wall)}, {_stamp(start_wall + elapsed_s)}, {megabytes:.4f}, "
            f"{megabytes / elapsed_s:.4f}, {count}, {count / elapsed_s:.4f}, {rebalance_s * 1000:.0f}, "
            f"{fetch_s * 1000:.0f}, {megabytes / fetch_s:.4f}, {count / fetch_s:.4f}")


def payload_bytes(records: Iterable) -> tuple[int, int]:
    """(records, bytes of their keys and values), as ConsumerPerformance counts them (a null key or
    value counts 0, its serialized size being -1), with no Python code run per record."""
    polled = list(records)
    key_sizes = list(map(KEY_SIZE, polled))
    value_sizes = list(map(VALUE_SIZE, polled))
    return len(polled), sum(key_sizes) + key_sizes.count(-1) + sum(value_sizes) + value_sizes.count(-1)


def _consume(consumer, args: argparse.Namespace, out: TextIO, start: float) -> tuple[int, int]:
    count = size = 0
    last_record = last_report = start
    report_count = report_size = 0
    while count < args.messages:
        records = consumer.poll(timeout_ms=100)
        now = time.monotonic()
        if not records:
            if (now - last_record) * 1000 > args.timeout:
                print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
                      f"({args.timeout} ms) exceeded. You can use the --timeout option to increase the "
                      f"timeout.", file=sys.stderr)
                break
            continue
        last_record = now
        polled, polled_bytes = payload_bytes(records)
        count += polled
        size += polled_bytes
        if args.show_detailed_stats and (now - last_report) * 1000 >= args.reporting_interval:
            window = max(now - last_report, 1e-9)
            window_mb = (size - report_size) / MB
            print(f"{_stamp(time.time())}, 0, {size / MB:.4f}, {window_mb / window:.4f}, {count}, "
                  f"{(count - report_count) / window:.4f}", file=out)
            last_report, report_count, report_size = now, count, size
    return count, size
