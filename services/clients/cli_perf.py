"""`odradek producer-perf-test` and `odradek consumer-perf-test`: Kafka's load-testing tools.

    odradek producer-perf-test --topic T --num-records N (--record-size S | --payload-file F)
        --throughput R [--producer-props k=v ...] [--producer.config FILE] [--bootstrap-server B]
    odradek consumer-perf-test --bootstrap-server B --topic T --messages N [--group G] [--from-latest]
        [--timeout MS] [--show-detailed-stats] [--reporting-interval MS] [--hide-header]

The producer test sends N records of random upper-case letters (or lines of a payload file), at most R
records/s (-1: no limit), and measures each record's latency from send() to its acknowledgement. Every
5 s it prints `N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.` and at the
end the same over the whole run followed by the 50th, 95th, 99th and 99.9th percentiles, as Kafka's
ProducerPerformance. The consumer test joins group G (default `perf-consumer-NNNNN`, five random
digits; a `group.id` of --consumer.config is kept when --group is absent), subscribes to the topic,
reads N records starting where the group committed (else at the earliest offset, or the latest with
--from-latest), and prints Kafka's ConsumerPerformance CSV line: start, end, MB, MB/s, records,
records/s, the time spent in rebalances (from the start or a revocation to the next assignment) and
the rest of the run as fetch time with the throughput over it. --timeout counts from the start, so a
slow first rebalance ends the run as an idle topic does.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TextIO

from services.clients.cli_console import client_settings, random_group_id
from services.common.config import ConfigError
from services.common.errors import KafkaError

REPORTING_INTERVAL_MS = 5000
MAX_LATENCY_SAMPLES = 500000
MB = 1024 * 1024
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S:%f"


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
    """Latency and throughput bookkeeping of ProducerPerformance: window lines and the summary."""

    def __init__(self, num_records: int, out: TextIO, reporting_interval_ms: int = REPORTING_INTERVAL_MS,
                 clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.out = out
        self.start = clock()
        self.sampling = max(1, num_records // min(max(num_records, 1), MAX_LATENCY_SAMPLES))
        self.latencies: list[float] = []
        self.count = 0
        self.bytes = 0
        self.total_latency_ms = 0.0
        self.max_latency_ms = 0.0
        self.reporting_interval_ms = reporting_interval_ms
        self._window_reset(self.start)
        self._lock = threading.Lock()

    def _window_reset(self, now: float) -> None:
        self.window_start = now
        self.window_count = 0
        self.window_bytes = 0
        self.window_total_latency_ms = 0.0
        self.window_max_latency_ms = 0.0

    def record(self, sequence: int, latency_ms: float, size: int, now: float) -> None:
        with self._lock:
            self.count += 1
            self.bytes += size
            self.total_latency_ms += latency_ms
            if latency_ms > self.max_latency_ms:
                self.max_latency_ms = latency_ms
            self.window_count += 1
            self.window_bytes += size
            self.window_total_latency_ms += latency_ms
            if latency_ms > self.window_max_latency_ms:
                self.window_max_latency_ms = latency_ms
            if sequence % self.sampling == 0:
                self.latencies.append(latency_ms)
            if (now - self.window_start) * 1000 >= self.reporting_interval_ms:
                self._print_window(now)
                self._window_reset(now)

    def _print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        count = max(self.window_count, 1)
        print(f"{self.window_count} records sent, {self.window_count / elapsed:.1f} records/sec "
              f"({self.window_bytes / elapsed / MB:.2f} MB/sec), "
              f"{self.window_total_latency_ms / count:.1f} ms avg latency, "
              f"{self.window_max_latency_ms:.1f} ms max latency.", file=self.out, flush=True)

    def percentiles(self, *quantiles: float) -> list[float]:
        ordered = sorted(self.latencies)
        if not ordered:
            return [0.0 for _ in quantiles]
        return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]

    def summary(self) -> str:
        elapsed = max(self.clock() - self.start, 1e-9)
        count = max(self.count, 1)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        return (f"{self.count} records sent, {self.count / elapsed:.1f} records/sec "
                f"({self.bytes / elapsed / MB:.2f} MB/sec), {self.total_latency_ms / count:.2f} ms avg latency, "
                f"{self.max_latency_ms:.2f} ms max latency, {p50:.0f} ms 50th, {p95:.0f} ms 95th, "
                f"{p99:.0f} ms 99th, {p999:.0f} ms 99.9th.")


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


def payloads(args: argparse.Namespace) -> list[bytes]:
    if args.record_size is not None:
        rng = random.Random()
        letters = string.ascii_uppercase
        return ["".join(rng.choice(letters) for _ in range(args.record_size)).encode("ascii")]
    with open(args.payload_file, "rb") as f:
        text = f.read()
    delimiter = args.payload_delimiter.encode("utf-8").decode("unicode_escape").encode("utf-8")
    lines = [line for line in text.split(delimiter) if line]
    if not lines:
        raise ValueError(f"File does not contain any payload: {args.payload_file}")
    print(f"Reading payloads from: {args.payload_file}", file=sys.stderr)
    print(f"Number of messages read: {len(lines)}", file=sys.stderr)
    return lines


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
    throttler = Throttler(args.throughput, stats.start)
    failures: list[BaseException] = []
    clock = time.monotonic
    pick = random.Random().choice if len(bodies) > 1 else None
    body = bodies[0]
    size = len(body)

    def completion(sequence: int, sent_at: float, length: int):
        def on_done(metadata, exception) -> None:
            if exception is not None:
                if not failures:
                    failures.append(exception)
                    print(f"Error: {exception}", file=sys.stderr)
                return
            now = clock()
            stats.record(sequence, (now - sent_at) * 1000, length, now)
        return on_done

    try:
        for sequence in range(args.num_records):
            if pick is not None:
                body = pick(bodies)
                size = len(body)
            producer.send(args.topic, body, callback=completion(sequence, clock(), size))
            throttler.throttle(sequence + 1)
            if failures:
                break
        producer.flush()
    except KafkaError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    finally:
        producer.close()  # as Kafka's tool: every callback has run before the total is printed
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
        for record in records:
            count += 1
            size += record.serialized_value_size + max(record.serialized_key_size, 0)
        if args.show_detailed_stats and (now - last_report) * 1000 >= args.reporting_interval:
            window = max(now - last_report, 1e-9)
            window_mb = (size - report_size) / MB
            print(f"{_stamp(time.time())}, 0, {size / MB:.4f}, {window_mb / window:.4f}, {count}, "
                  f"{(count - report_count) / window:.4f}", file=out)
            last_report, report_count, report_size = now, count, size
    return count, size
