"""Benchmark: what replication costs, and how long a leader's failover takes, on three brokers.

Starts its own cluster (ZooKeeper, one controller, three brokers; the `LocalCluster` launcher, free
ports, a temp dir) with `zookeeper.session.timeout.ms` = 6000, then measures in the same run:

1. Produce throughput of the same pre-encoded RecordBatch (100 records of 100 bytes) from
   `--inflight` threads, each sending one ProduceRequest at a time to the leader of its partition:
   acks=all to a topic with replication factor 3 and `min.insync.replicas`=2, beside acks=1 to a
   topic with replication factor 1 (three partitions each, so both spread over every broker).
   Rounds alternate between the two; the ratio acks=all / acks=1 has a target of >= 0.4. Beside
   each rate: the CPU time and the context switches per request of the three brokers together
   and of this process (the client), counted over all their threads from /proc, which say what a
   request costs even when other work on the machine moves the rates. The
   default levels: 6 (two requests in flight per leader), 15 (five per leader: one Kafka producer
   at its default max.in.flight.requests.per.connection), 24 (eight per leader) and 48 (sixteen per
   leader, where throughput saturates).
2. The same comparison with the Python `Producer` at full speed, as Kafka's producer-perf-test
   measures throughput: `--producer-records` records of 100 bytes sent with no key (so spread by
   the sticky partitioner) and flushed, acks=1 without idempotence to the RF=1 topic beside the
   Producer's defaults (acks=all, idempotent) to the RF=3 topic, alternating rounds.
3. Failover: kill -9 the leader of a replication-factor-3 partition and time until the first
   acks=all produce to that partition succeeds (the client retries every 50 ms), three times;
   the target is the session timeout + 2 s.

    python bench/replication.py [--seconds 5] [--rounds 2] [--inflight 6,15,24,48]
        [--producer-records 300000] [--failovers 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.lowlevel import LowLevelClient  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.common.pb.odradek.broker.v1 import broker_pb2  # noqa: E402
from services.common.records import build_batch  # noqa: E402
from services.common.service import node_channel  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import pid_alive, wait_until  # noqa: E402

SESSION_TIMEOUT_MS = 6000
FAILOVER_TARGET_S = SESSION_TIMEOUT_MS / 1000 + 2
RATIO_TARGET = 0.4
PARTITIONS = 3
RECORDS_PER_BATCH = 100
RECORD_BYTES = 100
REPLICATED = "acks-all-rf3"
UNREPLICATED = "acks-1-rf1"
FAILOVER = "failover-rf3"
PRODUCE = "/odradek.broker.v1.BrokerService/Produce"
CLIENT_CONFIG = {"request_timeout_ms": 2000, "retry_backoff_ms": 50, "default_api_timeout_ms": 30000}


CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def process_cost(pids: list[int]) -> tuple[float, int]:
    """(CPU seconds, context switches) the processes used so far, over all their live threads."""
    cpu_s, switches = 0.0, 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu_s += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                status = (task / "status").read_text()
            except OSError:
                continue  # the thread ended
            switches += sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line)
    return cpu_s, switches


def leaders(admin: Admin, topic: str) -> dict[int, int]:
    (description,) = admin.describe_topics([topic]).values()
    return {p.partition: p.leader for p in description.partitions}


def fully_replicated(admin: Admin, topic: str) -> bool:
    (description,) = admin.describe_topics([topic]).values()
    return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in description.partitions)


class ProduceDriver:
    """Sends pre-serialized ProduceRequests to partition leaders from several threads."""

    def __init__(self, cluster: LocalCluster, admin: Admin, topic: str, acks: int, batch: bytes) -> None:
        self.topic = topic
        self.channels = {}
        self.calls = {}
        self.requests = {}
        by_id = {cluster.services[n].node_id: n for n in cluster.broker_names}
        for partition, leader in leaders(admin, topic).items():
            channel = node_channel(cluster.endpoint(by_id[leader]))
            self.channels[partition] = channel
            self.calls[partition] = channel.unary_unary(
                PRODUCE, response_deserializer=broker_pb2.ProduceResponse.FromString)
            request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=30000)
            request.topic_data.add(name=topic).partition_data.add(index=partition, records=batch)
            self.requests[partition] = request.SerializeToString()

    def send(self, partition: int) -> None:
        reply = self.calls[partition](self.requests[partition], timeout=30)
        code = reply.responses[0].partition_responses[0].error_code
        if code:
            raise RuntimeError(f"produce to {self.topic}-{partition} failed with error code {code}")

    def run(self, seconds: float, inflight: int) -> tuple[int, float]:
        """(requests completed, elapsed seconds) with `inflight` threads for `seconds`."""
        done = [0] * inflight
        failures: list[BaseException] = []
        stop_at = time.perf_counter() + seconds

        def worker(slot: int) -> None:
            partition = slot % len(self.requests)
            try:
                while time.perf_counter() < stop_at:
                    self.send(partition)
                    done[slot] += 1
            except BaseException as exc:
                failures.append(exc)

        start = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(inflight)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        return sum(done), time.perf_counter() - start

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()


def measure_throughput(cluster: LocalCluster, admin: Admin, args) -> None:
    values = [os.urandom(RECORD_BYTES) for _ in range(RECORDS_PER_BATCH)]
    batch = build_batch(values)
    drivers = {
        "acks=1   RF=1": ProduceDriver(cluster, admin, UNREPLICATED, 1, batch),
        "acks=all RF=3": ProduceDriver(cluster, admin, REPLICATED, -1, batch),
    }
    print(f"throughput: batches of {RECORDS_PER_BATCH} records x {RECORD_BYTES} B ({len(batch)} B per batch) "
          f"to {PARTITIONS} partitions, one request at a time per thread, "
          f"{args.rounds} alternating rounds of {args.seconds:g} s per configuration")
    try:
        for driver in drivers.values():
            driver.run(1.0, min(args.inflight))  # warm-up: connections, segment files, fetcher threads
        brokers = [cluster.running_pid(name) for name in cluster.broker_names]
        client = [os.getpid()]
        for inflight in args.inflight:
            totals = {label: [0, 0.0, 0.0, 0, 0.0, 0] for label in drivers}
            for _ in range(args.rounds):
                for label, driver in drivers.items():
                    before = process_cost(brokers) + process_cost(client)
                    requests, elapsed = driver.run(args.seconds, inflight)
                    after = process_cost(brokers) + process_cost(client)
                    costs = [b - a for a, b in zip(before, after, strict=True)]
                    totals[label] = [t + c for t, c in zip(totals[label], [requests, elapsed, *costs], strict=True)]
            rates = {}
            for label, (requests, elapsed, broker_cpu_s, broker_switches, client_cpu_s, client_switches) \
                    in totals.items():
                rates[label] = requests * RECORDS_PER_BATCH / elapsed
                print(f"  {inflight:>3} in flight, {label}: {rates[label]:>9,.0f} records/s "
                      f"{requests * len(batch) / elapsed / 1e6:>6.1f} MB/s {requests / elapsed:>6.0f} requests/s; "
                      f"per request: brokers {broker_cpu_s / requests * 1000:.2f} ms CPU, "
                      f"{broker_switches / requests:.1f} switches; client {client_cpu_s / requests * 1000:.2f} ms "
                      f"CPU, {client_switches / requests:.1f} switches")
            ratio = rates["acks=all RF=3"] / rates["acks=1   RF=1"]
            verdict = "meets" if ratio >= RATIO_TARGET else "MISSES"
            print(f"  {inflight:>3} in flight, ratio acks=all RF=3 / acks=1 RF=1: {ratio:.2f}x "
                  f"({verdict} the target >= {RATIO_TARGET}x)")
    finally:
        for driver in drivers.values():
            driver.close()


def producer_rate(bootstrap: str, topic: str, values: list[bytes], **config) -> float:
    with Producer(bootstrap_servers=bootstrap, **config) as producer:
        producer.send(topic, b"warm-up").get(timeout=30)
        send = producer.send
        start = time.perf_counter()
        for value in values:
            send(topic, value)
        producer.flush()
        return len(values) / (time.perf_counter() - start)


def measure_producer(cluster: LocalCluster, args) -> None:
    values = [os.urandom(RECORD_BYTES) for _ in range(args.producer_records)]
    setups = {"acks=1   RF=1": (UNREPLICATED, {"acks": "1", "enable_idempotence": False}),
              "acks=all RF=3": (REPLICATED, {})}
    print(f"Producer at full speed: {len(values):,} records x {RECORD_BYTES} B, no key, {args.rounds} "
          "alternating rounds; acks=all RF=3 with the Producer's defaults (idempotent)")
    rates: dict[str, list[float]] = {label: [] for label in setups}
    for round_index in range(args.rounds):
        order = list(setups) if round_index % 2 == 0 else list(reversed(setups))
        for label in order:
            topic, config = setups[label]
            rates[label].append(producer_rate(cluster.bootstrap_servers, topic, values, **config))
    for round_index in range(args.rounds):
        unreplicated, replicated = rates["acks=1   RF=1"][round_index], rates["acks=all RF=3"][round_index]
        ratio = replicated / unreplicated
        verdict = "meets" if ratio >= RATIO_TARGET else "MISSES"
        print(f"  round {round_index + 1}: acks=1 RF=1 {unreplicated:>9,.0f} records/s, acks=all RF=3 "
              f"{replicated:>9,.0f} records/s, ratio {ratio:.2f}x ({verdict} the target >= {RATIO_TARGET}x)")


def restart_broker(cluster: LocalCluster, broker_id: int) -> None:
    """Starts a killed broker and waits until it serves, checking liveness by pid only (just after
    a spawn /proc/<pid>/cmdline can be empty, which the launcher's own wait takes for an exit)."""
    name = cluster.broker_name(broker_id)
    pid = cluster.start_service(name, wait=False)
    wait_until(lambda: cluster.is_serving(name) or not pid_alive(pid), 60, 0.1, message=f"{name} to serve")
    if not pid_alive(pid):
        raise RuntimeError(f"{name} exited while starting")


def measure_failover(cluster: LocalCluster, admin: Admin, repeats: int) -> None:
    print(f"failover: kill -9 of the leader of {FAILOVER}-0 until the first acks=all produce succeeds "
          f"(zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}; target <= {FAILOVER_TARGET_S:g} s)")
    batch = build_batch([b"x" * RECORD_BYTES])
    times = []
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        for attempt in range(1, repeats + 1):
            wait_until(lambda: fully_replicated(admin, FAILOVER), 60, 0.2,
                       message=f"every replica of {FAILOVER} in the ISR")
            result = client.produce(FAILOVER, 0, batch, acks=-1)
            if result.error_code:
                raise RuntimeError(f"produce before the kill failed: {result}")
            victim = leaders(admin, FAILOVER)[0]
            killed_at = time.monotonic()
            cluster.kill_service(cluster.broker_name(victim))
            while True:
                result = client.produce(FAILOVER, 0, batch, acks=-1, timeout_ms=5000, retry_timeout_ms=1000)
                if result.error_code == 0:
                    break
                if time.monotonic() - killed_at > 120:
                    raise RuntimeError(f"no successful produce within 120 s of the kill: {result}")
            took = time.monotonic() - killed_at
            times.append(took)
            print(f"  kill {attempt} (broker {victim}): first acks=all produce after {took:.2f} s")
            restart_broker(cluster, victim)
    worst = max(times)
    verdict = "meets" if worst <= FAILOVER_TARGET_S else "MISSES"
    print(f"  max {worst:.2f} s ({verdict} the target <= {FAILOVER_TARGET_S:g} s = session timeout + 2 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one throughput round")
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds per configuration")
    parser.add_argument("--inflight", type=lambda text: [int(n) for n in text.split(",")], default=[6, 15, 24, 48],
                        help="produce requests in flight (threads), comma-separated for several runs")
    parser.add_argument("--producer-records", type=int, default=300000,
                        help="records per Producer round (0 skips the Producer comparison)")
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        session = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS}
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, controllers=1, free_ports=True,
                               broker_config={**session, "log.segment.bytes": 1 << 30},
                               controller_config=session)
        try:
            cluster.start()
            print(f"cluster: 3 brokers, 1 controller, zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}, "
                  f"{os.cpu_count()} CPUs")
            with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
                min_isr = {"min.insync.replicas": "2"}
                admin.create_topics([NewTopic(REPLICATED, PARTITIONS, 3, configs=min_isr),
                                     NewTopic(UNREPLICATED, PARTITIONS, 1),
                                     NewTopic(FAILOVER, 1, 3, configs=min_isr)])
                for topic in (REPLICATED, UNREPLICATED, FAILOVER):
                    admin.wait_for_topic(topic, 60, partitions=PARTITIONS if topic != FAILOVER else 1)
                    wait_until(lambda t=topic: fully_replicated(admin, t), 60, 0.2,
                               message=f"every replica of {topic} in the ISR")
                measure_throughput(cluster, admin, args)
                if args.producer_records > 0:
                    measure_producer(cluster, args)
                if args.failovers > 0:
                    measure_failover(cluster, admin, args.failovers)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
