"""Benchmark: acks=all produce latency while hundreds of consumers long-poll an idle topic.

Starts its own cluster (ZooKeeper, one controller, three brokers; the `LocalCluster` launcher, free
ports, a temp dir), an idle topic with one partition per broker (replication factor 1) and a
replication-factor-3 topic with `min.insync.replicas`=2. For each number of idle consumers
(`--pollers`, default 0, 100 and 500), `LongPollers` keeps that many Fetch calls parked on the
idle partitions' leaders (max_wait_ms `--max-wait-ms`, at the log end, so each waits out its
max_wait and is sent again at once; their first fetches are spread over one max_wait, as
consumers that did not all start in the same millisecond; from a process of their own, so that
their callbacks do not take this process's interpreter lock), while one thread sends acks=all
ProduceRequests of one batch (10 records x 100 B) to the replicated topic, one at a time, for
`--seconds`. Prints p50/p99 of the produce latency per level and the ratio p99(most pollers) /
p99(no pollers) (target: within 2x). A broker whose parked requests held threads would starve
the produce, and the followers' fetches it waits for, as soon as the pollers outnumber those
threads.

With `--consumers 0,400` the idle consumers are real `Consumer`s instead (their defaults:
fetch.max.wait.ms 500, one fetch session per broker), each assigned one idle partition at its end
and polling in a thread of its own, spread over `--consumer-processes` processes (default 4). Each
such process reports the CPU it used from the moment all its consumers poll until it is stopped,
and the fetches they made meanwhile; the bench prints their sum as CPU per fetch and per second.

    python bench/broker_load.py [--pollers 0,100,500] [--seconds 10] [--max-wait-ms 3000]
    python bench/broker_load.py --consumers 0,400 [--consumer-processes 4]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.consumer import Consumer  # noqa: E402
from services.clients.lowlevel import LowLevelClient  # noqa: E402
from services.clients.partition_requests import fetch_request, produce_request  # noqa: E402
from services.clients.transport import BROKER  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import start_process, stop_process, wait_until  # noqa: E402

IDLE = "idle"
REPLICATED = "acks-all-rf3"
RATIO_TARGET = 2.0
FETCH_CALL_MARGIN_S = 30.0
PRODUCE_TIMEOUT_MS = 30000
STOP_MARGIN_S = 90.0  # a process of 100 consumers closes them one after another


class LongPollers:
    """`count` consumers long-polling the partitions of an idle topic through the client's channel
    pool: each is a chain of Fetch calls, the next sent from the previous one's completion
    callback, so no thread waits per consumer. Fetches that fail are kept in `errors` and end
    their chain."""

    def __init__(self, client: LowLevelClient, topic: str, count: int, max_wait_ms: int) -> None:
        self.max_wait_ms = max_wait_ms
        self.completed = 0
        self.errors: list[str] = []
        self._in_flight = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.started = threading.Event()
        partitions = client.partitions_for(topic)
        calls = []
        for info in partitions:
            leader = client.metadata.leader_for(topic, info.partition)
            end_offset = client.list_offset(topic, info.partition, "latest").offset
            request = fetch_request({TopicPartition(topic, info.partition): end_offset},
                                    partition_max_bytes=1 << 20, max_wait_ms=max_wait_ms, min_bytes=1,
                                    max_bytes=1 << 20)
            calls.append((client.pool.stub(leader.address, BROKER).Fetch, request))
        self._slots = [calls[i % len(calls)] for i in range(count)]

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def start(self, spread_s: float = 0.0) -> None:
        """Sends every consumer's first fetch, spread evenly over `spread_s` (from a thread of its
        own) so that their long polls do not all expire at the same moment; `started` is set
        once all are sent."""
        with self._lock:
            self._in_flight = len(self._slots)

        def send_all() -> None:
            for slot in range(len(self._slots)):
                self._send(slot)
                if spread_s:
                    self._stopped.wait(spread_s / len(self._slots))
            self.started.set()

        if spread_s:
            threading.Thread(target=send_all, name="long-poll-starter", daemon=True).start()
        else:
            send_all()

    def _send(self, slot: int) -> None:
        fetch, request = self._slots[slot]
        future = fetch.future(request, timeout=self.max_wait_ms / 1000 + FETCH_CALL_MARGIN_S)
        future.add_done_callback(lambda done: self._on_done(slot, done))

    def _on_done(self, slot: int, future: grpc.Future) -> None:
        error = None
        try:
            response = future.result()
            codes = [p.error_code for t in response.responses for p in t.partitions]
            if response.error_code or any(codes):
                error = f"fetch answered error {response.error_code} / {codes}"
        except grpc.RpcError as exc:
            error = f"fetch failed: {exc.code()} {exc.details()}"
        with self._lock:
            self.completed += 1
            if error is not None:
                self.errors.append(error)
            if error is not None or self._stopped.is_set():
                self._in_flight -= 1
                return
        self._send(slot)

    def stop(self, timeout_s: float) -> None:
        """Sends no more fetches and waits for the ones in flight to be answered."""
        self._stopped.set()
        wait_until(lambda: self.in_flight == 0, timeout_s, 0.05, message="the long polls to be answered")


def produce_latencies_ms(client: LowLevelClient, seconds: float) -> list[float]:
    """acks=all produces of one batch, one at a time, for `seconds`; each must be acknowledged."""
    tp = TopicPartition(REPLICATED, 0)
    leader = client.metadata.leader_for(REPLICATED, 0)
    produce = client.pool.stub(leader.address, BROKER).Produce
    request = produce_request({tp: build_batch([os.urandom(100) for _ in range(10)])}, -1, PRODUCE_TIMEOUT_MS)
    latencies = []
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        started = time.perf_counter()
        reply = produce(request, timeout=PRODUCE_TIMEOUT_MS / 1000 + 5)
        latencies.append((time.perf_counter() - started) * 1000)
        code = reply.responses[0].partition_responses[0].error_code
        if code:
            raise RuntimeError(f"acks=all produce failed with error code {code}")
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def wait_for_sigterm(stop: threading.Event) -> None:
    """Waits until the SIGTERM handler sets `stop`. Wakes twice a second: a signal the kernel hands
    to another thread is handled only once the main thread runs again."""
    while not stop.wait(0.5):
        pass


def serve_pollers(bootstrap: str, count: int, max_wait_ms: int) -> None:
    """The pollers' process: long-polls until SIGTERM, then prints what was answered as JSON."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LowLevelClient(bootstrap_servers=bootstrap) as client:
        polling = LongPollers(client, IDLE, count, max_wait_ms)
        polling.start(spread_s=max_wait_ms / 1000)
        polling.started.wait()
        print("started", flush=True)
        wait_for_sigterm(stop)
        polling.stop(max_wait_ms / 1000 + FETCH_CALL_MARGIN_S)
        print(json.dumps({"answered": polling.completed, "errors": polling.errors}), flush=True)


def serve_consumers(bootstrap: str, count: int) -> None:
    """A consumers' process: `count` Consumers, each on one idle partition at its end, polling in a
    thread of its own until SIGTERM; then prints the polls answered as JSON."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    polls = [0] * count
    errors: list[str] = []
    consumers = []
    for number in range(count):
        consumer = Consumer(bootstrap_servers=bootstrap)
        tp = TopicPartition(IDLE, number % 3)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        consumer.position(tp)
        consumers.append(consumer)

    def poll(number: int) -> None:
        try:
            while not stop.is_set():
                consumers[number].poll(timeout_ms=1000)
                polls[number] += 1
        except Exception as exc:  # reported at the end
            errors.append(repr(exc))

    def fetches() -> int:  # read while they poll: their counters, not metrics(), which is the poller's
        return sum(consumer._metrics.fetch_total for consumer in consumers)

    threads = [threading.Thread(target=poll, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    fetches_before, cpu_before_s, started_s = fetches(), time.process_time(), time.perf_counter()
    print("started", flush=True)
    wait_for_sigterm(stop)
    cpu_s, wall_s = time.process_time() - cpu_before_s, time.perf_counter() - started_s
    fetched = fetches() - fetches_before
    stopping_s = time.perf_counter()
    for thread in threads:
        thread.join(10)
    joined_s = time.perf_counter()
    for consumer in consumers:
        consumer.close()
    print(json.dumps({"answered": sum(polls), "errors": errors, "cpu_s": cpu_s, "wall_s": wall_s,
                      "fetches": fetched, "join_s": joined_s - stopping_s,
                      "close_s": time.perf_counter() - joined_s}), flush=True)


def measure(client: LowLevelClient, bootstrap: str, pollers: int, log_dir: Path,
            args) -> tuple[int, float, float, int, list[dict]]:
    """(produces, p50 ms, p99 ms, polls answered, the pollers' processes' reports) with `pollers`
    idle long polls, or idle Consumers in `args.consumer_processes` processes when `args.consumers`
    is given."""
    if args.consumers and pollers:
        share = [pollers // args.consumer_processes + (i < pollers % args.consumer_processes)
                 for i in range(args.consumer_processes)]
        commands = [[sys.executable, __file__, "--serve-consumers", str(n), "--bootstrap", bootstrap]
                    for n in share if n]
    elif pollers or not args.consumers:
        commands = [[sys.executable, __file__, "--serve-pollers", str(pollers), "--bootstrap", bootstrap,
                     "--max-wait-ms", str(args.max_wait_ms)]]
    else:
        commands = []
    logs = [log_dir / f"pollers-{pollers}-{i}.log" for i in range(len(commands))]
    processes = [start_process(command, log) for command, log in zip(commands, logs, strict=True)]
    try:
        for log in logs:
            wait_until(lambda log=log: "started" in log.read_text(), 300, 0.1, message="the pollers to start")
        produce_latencies_ms(client, 1.0)  # warm-up
        latencies = produce_latencies_ms(client, args.seconds)
    finally:
        for process in processes:
            stop_process(process, timeout_s=args.max_wait_ms / 1000 + FETCH_CALL_MARGIN_S + STOP_MARGIN_S)
    answered = 0
    reports = []
    for log in logs:
        lines = log.read_text().splitlines()
        try:
            report = json.loads(lines[-1])
        except (IndexError, ValueError):
            tail = "\n".join(lines[-30:])
            raise RuntimeError(f"a pollers' process reported nothing; its log ends:\n{tail}") from None
        if report["errors"]:
            raise RuntimeError(f"{len(report['errors'])} polls failed, first: {report['errors'][0]}")
        answered += report["answered"]
        reports.append(report)
    return len(latencies), statistics.median(latencies), percentile(latencies, 0.99), answered, reports


def consumer_cpu(reports: list[dict]) -> str:
    """The consumer processes' CPU per fetch and per second, summed over the processes."""
    cpu_s = sum(report["cpu_s"] for report in reports)
    fetches = sum(report["fetches"] for report in reports)
    wall_s = max(report["wall_s"] for report in reports)
    return (f"consumer processes: {fetches} fetches in {wall_s:.1f} s ({fetches / wall_s:.0f}/s), "
            f"{cpu_s:.2f} s CPU ({100 * cpu_s / wall_s / len(reports):.1f}% per process), "
            f"{1e6 * cpu_s / max(fetches, 1):.0f} us CPU per fetch; stopping took "
            f"{max(report['join_s'] + report['close_s'] for report in reports):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pollers", type=lambda text: [int(n) for n in text.split(",")], default=[0, 100, 500],
                        help="numbers of idle long-polling consumers, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="produce time per level")
    parser.add_argument("--max-wait-ms", type=int, default=3000, help="the long polls' max_wait_ms")
    parser.add_argument("--consumers", type=lambda text: [int(n) for n in text.split(",")],
                        help="numbers of idle Consumers, comma-separated (instead of --pollers)")
    parser.add_argument("--consumer-processes", type=int, default=4)
    parser.add_argument("--serve-pollers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-consumers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_pollers is not None:
        serve_pollers(args.bootstrap, args.serve_pollers, args.max_wait_ms)
        return
    if args.serve_consumers is not None:
        serve_consumers(args.bootstrap, args.serve_consumers)
        return

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, controllers=1, free_ports=True)
        try:
            cluster.start()
            with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin, \
                    LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
                admin.create_topics([NewTopic(IDLE, 3, 1),
                                     NewTopic(REPLICATED, 1, 3, configs={"min.insync.replicas": "2"})])
                admin.wait_for_topic(IDLE, 60, partitions=3)
                admin.wait_for_topic(REPLICATED, 60, partitions=1)
                wait_until(lambda: client.produce(REPLICATED, 0, build_batch([b"warm"]), acks=-1).error_code == 0,
                           60, 0.2, message="the replicated topic to take acks=all produces")
                print(f"cluster: 3 brokers, 1 controller, {os.cpu_count()} CPUs; idle topic {IDLE!r} with one "
                      f"partition per broker, long polls of max_wait_ms={args.max_wait_ms}; acks=all produces "
                      f"of 10 x 100 B to {REPLICATED!r} (RF=3, min.insync.replicas=2), one at a time, "
                      f"{args.seconds:g} s per level")
                if args.consumers:
                    print(f"idle Consumers (fetch.max.wait.ms 500, fetch sessions) in "
                          f"{args.consumer_processes} processes, each polling in a thread of its own")
                print(f"{'pollers':>8}{'produces':>10}{'p50 ms':>9}{'p99 ms':>9}{'long polls answered':>21}")
                p99 = {}
                for pollers in args.consumers or args.pollers:
                    count, p50, p99[pollers], answered, reports = measure(
                        client, cluster.bootstrap_servers, pollers, Path(tmp), args)
                    print(f"{pollers:>8}{count:>10}{p50:>9.2f}{p99[pollers]:>9.2f}{answered:>21}")
                    if args.consumers and reports:
                        print(f"{'':>8}{consumer_cpu(reports)}")
                least, most = min(p99), max(p99)
                ratio = p99[most] / p99[least]
                verdict = "meets" if ratio <= RATIO_TARGET else "MISSES"
                print(f"ratio p99({most}) / p99({least}): {ratio:.2f}x ({verdict} the target <= {RATIO_TARGET:g}x)")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
