"""Benchmark: librdkafka (confluent-kafka) against Apache Kafka 4 and against Odradek's Kafka protocol
listeners, and Odradek's own Producer and Consumer over gRPC, in one run.

Each system runs alone on the machine, one after the other:

1. Apache Kafka (`bench/kafka_peer.py`: three KRaft combined-mode nodes, -Xmx512m each);
2. Odradek: its own cluster (ZooKeeper, one controller, three brokers; the `LocalCluster` launcher,
   free ports, a temp dir), or an Odradek already running, given by `--odradek-grpc-bootstrap`
   (and `--odradek-bootstrap` for its Kafka listeners, as `make up` prints them).

On each, a topic of one partition, replication factor 3, min.insync.replicas=2 (created by
librdkafka's AdminClient on Apache Kafka, by Odradek's Admin on Odradek), and `--records` records
of 100 bytes, after a fifth as many produced untimed by the same client (new JVMs, like a new
cluster of any kind, are slower at first):

- produce: librdkafka's Producer with acks=all and otherwise its defaults (linger.ms=5, no
  idempotence), `produce()` of every record then `flush()`, timed from the first `produce()` after
  a warm-up record was acknowledged to the end of the flush; Odradek's Producer (acks=all,
  idempotent: its defaults) the same way over gRPC;
- consume: librdkafka's Consumer assigned the partition from its beginning, `consume()` up to
  `--batch` messages at a time until every record (the warm-up's too) came, reading each value,
  timed from the first batch on, which is not counted (the wait for it, half a second against
  Apache Kafka here, is printed apart); Odradek's Consumer assigned and sought to the beginning,
  `poll()` with `max.poll.records` = `--batch`, timed from the assignment.

- Kafka's own ProducerPerformance (Java, acks=all, its defaults otherwise; `--perf-records` records)
  on each, as users measure a cluster: records/s, average and p99 latency.

Prints records/s of each and the ratios "librdkafka to Odradek / librdkafka to Apache Kafka" for
produce and consume. When Odradek's brokers have no Kafka listener (none configured, or nothing
answers there), that half prints "Odradek has no Kafka listener" and the rest runs.

    python bench/kafka_protocol.py [--records 500000] [--batch 1000] [--perf-records 200000] [--kafka-only]
        [--odradek-grpc-bootstrap HOST:PORT] [--odradek-bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka_peer import KAFKA_VERSION, KafkaPeer, run_tool  # noqa: E402  (bench/kafka_peer.py)
from peers import odradek_consume  # noqa: E402  (bench/peers.py: Consumer.poll of one partition)
from replication import producer_rate  # noqa: E402  (bench/replication.py: one plain producer loop)

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic as OdradekNewTopic  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402

RECORD_SIZE = 100
REPLICATION = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
RDKAFKA_TOPIC = "rdkafka"
PERF_TOPIC = "perf"
GRPC_TOPIC = "grpc"
DEADLINE_S = 600.0
LISTENER_CHECK_S = 10.0
WARM_UP_FRACTION = 5  # a fifth of --records, produced untimed before the timed run


def make_values(count: int) -> list[bytes]:
    pool = [random.randbytes(RECORD_SIZE) for _ in range(1024)]
    return [pool[index & 1023] for index in range(count)]


# --------------------------------------------------------------------------------------------- librdkafka

def kafka_listener_answers(bootstrap: str) -> str | None:
    """None when a Kafka client gets metadata from `bootstrap`, else why not."""
    try:
        metadata = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=LISTENER_CHECK_S)
    except confluent_kafka.KafkaException as exc:
        return str(exc)
    return None if metadata.brokers else "no brokers in its metadata"


def rdkafka_create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, REPLICATION, config=TOPIC_CONFIG)], operation_timeout=60)
    futures[topic].result(timeout=90)


def rdkafka_produce(bootstrap: str, topic: str, values: list[bytes], config: dict | None = None) -> float:
    """Records/s; `config` adds librdkafka settings (security)."""
    failures: list[str] = []

    def on_delivery(error, message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "on_delivery": on_delivery,
                                         "delivery.report.only.error": True, **(config or {})})
    producer.produce(topic, b"warm-up", partition=0)
    if producer.flush(60) or failures:
        raise RuntimeError(f"librdkafka's warm-up record was not acknowledged: {failures[:3]}")
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for value in values:
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:  # its queue is full: serve delivery reports until there is room
                poll(0.01)
    if producer.flush(DEADLINE_S):
        raise RuntimeError(f"librdkafka left records unacknowledged after {DEADLINE_S:g} s")
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[:3]}")
    return len(values) / elapsed


class ConsumeRun(NamedTuple):
    records_per_s: float
    first_record_s: float  # from the assignment to the first record


def rdkafka_consume(bootstrap: str, topic: str, count: int, batch: int, config: dict | None = None) -> ConsumeRun:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{random.randrange(10**9)}",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         **(config or {})})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        got = 0
        assigned = time.perf_counter()
        first, first_batch = assigned, 0  # the clock starts when the first batch came, which is not counted
        while got < count:
            if time.perf_counter() > assigned + DEADLINE_S:
                raise RuntimeError(f"librdkafka read {got} of {count} records in {DEADLINE_S:g} s")
            # consume() waits for all of num_messages (or its timeout): never ask for more than are left
            messages = consumer.consume(num_messages=min(batch, count - got), timeout=1.0)
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"librdkafka's fetch failed: {message.error()}")
                message.value()
            if messages and not first_batch:
                first, first_batch = time.perf_counter(), len(messages)
            got += len(messages)
        return ConsumeRun((got - first_batch) / (time.perf_counter() - first), first - assigned)
    finally:
        consumer.close()


def warm_up_values(values: list[bytes]) -> list[bytes]:
    return values[:len(values) // WARM_UP_FRACTION]


def measure_rdkafka(bootstrap: str, values: list[bytes], batch: int) -> tuple[float, float]:
    """librdkafka's produce and consume rates on `RDKAFKA_TOPIC`, which exists already."""
    warm_up = warm_up_values(values)
    rdkafka_produce(bootstrap, RDKAFKA_TOPIC, warm_up)
    produced = rdkafka_produce(bootstrap, RDKAFKA_TOPIC, values)
    # every record of the topic: both runs' values and their warm-up records
    consumed = rdkafka_consume(bootstrap, RDKAFKA_TOPIC, len(warm_up) + len(values) + 2, batch)
    print(f"  librdkafka -> {bootstrap}: first record {consumed.first_record_s:.2f} s after the assignment",
          flush=True)
    return produced, consumed.records_per_s


class PerfRun(NamedTuple):
    records_per_s: float
    average_latency_ms: float
    p99_latency_ms: float


def java_producer_perf(bootstrap: str, topic: str, records: int) -> PerfRun:
    """Kafka's own ProducerPerformance (Java, acks=all, its other defaults) against `bootstrap`:
    the tool users run to measure a cluster."""
    argv = ["--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_SIZE),
            "--throughput", "-1", "--producer-props", "acks=all", f"bootstrap.servers={bootstrap}"]
    summary = run_tool("producer-perf-test", argv, timeout_s=DEADLINE_S).check().stdout.strip().splitlines()[-1]
    # "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, p50, p95, p99, p99.9"
    parts = [part.strip() for part in summary.split(",")]
    rate = float(parts[1].split()[0])
    average = float(parts[2].split()[0])
    p99 = float(next(part for part in parts if part.endswith("99th")).split()[0])
    return PerfRun(rate, average, p99)


# --------------------------------------------------------------------------------------------- odradek

@contextlib.contextmanager
def odradek_cluster(args, base: Path) -> Iterator[tuple[str, str]]:
    """(gRPC bootstrap, Kafka listener bootstrap or "") of the Odradek cluster to measure."""
    if args.odradek_grpc_bootstrap:
        yield args.odradek_grpc_bootstrap, args.odradek_bootstrap or ""
        return
    cluster = LocalCluster(base / "odradek", brokers=3, controllers=1, free_ports=True)
    try:
        cluster.start()
        yield cluster.bootstrap_servers, args.odradek_bootstrap or getattr(cluster, "kafka_bootstrap_servers", "")
    finally:
        cluster.stop()


def measure_odradek(args, base: Path, values: list[bytes]) -> dict[str, tuple[float, float] | PerfRun | str]:
    results: dict[str, tuple[float, float] | PerfRun | str] = {}
    with odradek_cluster(args, base) as (grpc_bootstrap, kafka_bootstrap):
        with Admin(bootstrap_servers=grpc_bootstrap) as admin:  # both topics, through Odradek's own Admin
            admin.create_topics([OdradekNewTopic(name, 1, REPLICATION, configs=TOPIC_CONFIG)
                                 for name in (GRPC_TOPIC, RDKAFKA_TOPIC, PERF_TOPIC)])
            for name in (GRPC_TOPIC, RDKAFKA_TOPIC, PERF_TOPIC):
                admin.wait_for_topic(name, 60, partitions=1)
        warm_up = warm_up_values(values)
        producer_rate(grpc_bootstrap, GRPC_TOPIC, warm_up, acks="all")
        produced = producer_rate(grpc_bootstrap, GRPC_TOPIC, values, acks="all")
        consumed = odradek_consume(grpc_bootstrap, GRPC_TOPIC, 0, len(warm_up) + len(values) + 2, args.batch)
        results["grpc"] = (produced, consumed)
        missing = "no Kafka listener is configured" if not kafka_bootstrap else kafka_listener_answers(kafka_bootstrap)
        if missing is None:
            try:
                results["rdkafka"] = measure_rdkafka(kafka_bootstrap, values, args.batch)
                results["perf"] = java_producer_perf(kafka_bootstrap, PERF_TOPIC, args.perf_records)
            except (RuntimeError, confluent_kafka.KafkaException) as exc:
                results["rdkafka"] = f"failed against Odradek's Kafka listener: {exc}"
        else:
            results["rdkafka"] = f"Odradek has no Kafka listener ({missing})"
    return results


# --------------------------------------------------------------------------------------------- report

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500000)
    parser.add_argument("--batch", type=int, default=1000, help="consume() num_messages, max.poll.records")
    parser.add_argument("--perf-records", type=int, default=200000, help="records of Kafka's ProducerPerformance")
    parser.add_argument("--kafka-only", action="store_true", help="measure Apache Kafka alone")
    parser.add_argument("--odradek-grpc-bootstrap", help="a running Odradek's brokers (gRPC), e.g. make up's")
    parser.add_argument("--odradek-bootstrap", help="a running Odradek's Kafka listeners, e.g. 127.0.0.1:19092")
    args = parser.parse_args()
    values = make_values(args.records)
    print(f"{args.records} records of {RECORD_SIZE} B, one partition, replication factor {REPLICATION}, "
          f"min.insync.replicas=2, acks=all; librdkafka {confluent_kafka.libversion()[0]} "
          f"(confluent-kafka {version('confluent-kafka')}); {os.cpu_count()} CPUs", flush=True)
    rows: dict[str, tuple[float, float] | str] = {}
    odradek_perf = None
    with tempfile.TemporaryDirectory(prefix="odradek-kafka-protocol-") as tmp:
        base = Path(tmp)
        with KafkaPeer(base / "kafka", brokers=3) as peer:
            rdkafka_create_topic(peer.bootstrap_servers, RDKAFKA_TOPIC)
            rows[f"librdkafka -> Apache Kafka {KAFKA_VERSION}"] = kafka = measure_rdkafka(
                peer.bootstrap_servers, values, args.batch)
            rdkafka_create_topic(peer.bootstrap_servers, PERF_TOPIC)
            kafka_perf = java_producer_perf(peer.bootstrap_servers, PERF_TOPIC, args.perf_records)
        print(f"Apache Kafka {KAFKA_VERSION} (3 KRaft nodes): produce {kafka[0]:,.0f} rec/s, "
              f"consume {kafka[1]:,.0f} rec/s", flush=True)
        if not args.kafka_only:
            odradek = measure_odradek(args, base, values)
            rows["librdkafka -> Odradek (Kafka listener)"] = odradek["rdkafka"]
            rows["Odradek Producer/Consumer (gRPC)"] = odradek["grpc"]
            odradek_perf = odradek.get("perf")
    print(f"{'client -> system':<42}{'produce rec/s':>15}{'consume rec/s':>15}")
    for name, figures in rows.items():
        if isinstance(figures, str):
            print(f"{name:<42}  {figures}")
        else:
            print(f"{name:<42}{figures[0]:>15,.0f}{figures[1]:>15,.0f}")
    print(f"Kafka's ProducerPerformance ({args.perf_records} records, acks=all) -> Apache Kafka: "
          f"{kafka_perf.records_per_s:,.0f} rec/s, avg latency {kafka_perf.average_latency_ms:.1f} ms, "
          f"p99 {kafka_perf.p99_latency_ms:.0f} ms")
    if not args.kafka_only and isinstance(odradek_perf, PerfRun):
        print(f"Kafka's ProducerPerformance ({args.perf_records} records, acks=all) -> Odradek: "
              f"{odradek_perf.records_per_s:,.0f} rec/s, avg latency {odradek_perf.average_latency_ms:.1f} ms, "
              f"p99 {odradek_perf.p99_latency_ms:.0f} ms; "
              f"ratio {odradek_perf.records_per_s / kafka_perf.records_per_s:.2f}x")
    ours = rows.get("librdkafka -> Odradek (Kafka listener)")
    if isinstance(ours, tuple):
        print(f"librdkafka to Odradek / librdkafka to Apache Kafka: produce {ours[0] / kafka[0]:.2f}x, "
              f"consume {ours[1] / kafka[1]:.2f}x")
    elif ours is not None:
        print("librdkafka to Odradek / librdkafka to Apache Kafka: none (Odradek has no Kafka listener)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
