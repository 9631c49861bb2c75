"""Benchmark: what TLS and SASL cost the Producer and the Consumer, against plaintext, in one run.

Three clusters laid out alike (the `LocalCluster` launcher: ZooKeeper, one controller, one broker,
free ports, a temp dir), running side by side:

1. plaintext: gRPC and the Kafka listener in plaintext;
2. `odradek dev up --secure`'s security: gRPC over mutual TLS, a SASL_SSL Kafka listener, the ACL
   authorizer on, ZooKeeper over TLS;
3. the same with an SSL Kafka listener (TLS with a client certificate, no SASL).

Rows: librdkafka (confluent-kafka) on the Kafka listener in PLAINTEXT (1), SSL with the
administrator's certificate (3) and SASL_SSL with SCRAM-SHA-512 as the SCRAM user `admin` (2);
Odradek's Producer and Consumer over gRPC in plaintext (1) and over TLS with the administrator's
certificate (2), and over TLS with SCRAM-SHA-512 credentials as `admin` (SASL_SSL, 2).

Each round measures every row, one after the other (the order reversed every other round, so that
a machine's changing load falls on all of them), on a new topic of one partition (replication
factor 1): the Producer's records/s (acks=all, `produce()`/`send()` of `--records` records of 100
bytes then `flush()`, after an untimed warm-up of a fifth as many); its acks=all latency, p50 and
p99 of `--latency-records` records sent one at a time, each awaited (librdkafka with linger.ms=0);
the Consumer's records/s (assigned the partition from its beginning, every record read;
librdkafka's clock starts at its first batch, as in `bench/kafka_protocol.py`). The table gives
each row's median over the rounds and its ratio to the plaintext row of the same client.

    python bench/security.py [--records 50000] [--latency-records 500] [--batch 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import confluent_kafka  # noqa: E402
from kafka_protocol import make_values, rdkafka_consume, rdkafka_produce, warm_up_values  # noqa: E402
from peers import odradek_consume, percentile  # noqa: E402  (bench/peers.py)
from replication import producer_rate  # noqa: E402  (bench/replication.py: one plain producer loop)

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402

RDKAFKA = "librdkafka, Kafka listener"
GRPC = "Odradek clients, gRPC"
DELIVERY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Setup:
    name: str
    secure: bool
    kafka_protocol: str  # of the Kafka listener


SETUPS = (Setup("plaintext", False, "PLAINTEXT"), Setup("secure", True, "SASL_SSL"), Setup("secure-ssl", True, "SSL"))


# --------------------------------------------------------------------------------------------- settings

def rdkafka_security(cluster: LocalCluster, protocol: str) -> dict[str, str]:
    """librdkafka's keys for the cluster's Kafka listener of `protocol`, as the administrator."""
    if protocol == "PLAINTEXT":
        return {}
    settings = cluster.client_settings()  # SASL_SSL, SCRAM-SHA-512, and the admin's certificate
    if protocol == "SSL":
        settings = {k: v for k, v in settings.items() if not k.startswith("sasl.")}
        settings["security.protocol"] = "SSL"
    return settings


def grpc_tls(cluster: LocalCluster) -> dict[str, str]:
    """Odradek client keywords for gRPC over TLS with the administrator's certificate."""
    keys = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
    settings = cluster.client_settings()
    return {"security_protocol": "SSL", **{key.replace(".", "_"): settings[key] for key in keys}}


def grpc_sasl(cluster: LocalCluster) -> dict[str, str]:
    """Odradek client keywords for SASL_SSL over gRPC."""
    settings = cluster.client_settings()
    return {**grpc_tls(cluster), "security_protocol": "SASL_SSL",
            **{key.replace(".", "_"): settings[key] for key in ("sasl.mechanism", "sasl.username", "sasl.password")}}


# --------------------------------------------------------------------------------------------- latency

def rdkafka_latency(bootstrap: str, topic: str, count: int, config: dict) -> list[float]:
    """acks=all latency of records sent one at a time, each awaited, in ms."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **config})
    value = b"l" * 100
    latencies = []
    for _ in range(count + 1):  # the first connects
        start = time.perf_counter()
        producer.produce(topic, value, partition=0)
        if producer.flush(DELIVERY_TIMEOUT_S):
            raise RuntimeError("librdkafka left a record unacknowledged")
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies[1:]


def odradek_latency(bootstrap: str, topic: str, count: int, config: dict) -> list[float]:
    with Producer(bootstrap_servers=bootstrap, acks="all", **config) as producer:
        value = b"l" * 100
        latencies = []
        for _ in range(count + 1):
            start = time.perf_counter()
            producer.send(topic, value, partition=0).get(timeout=DELIVERY_TIMEOUT_S)
            latencies.append((time.perf_counter() - start) * 1000)
    return latencies[1:]


# --------------------------------------------------------------------------------------------- rows

@dataclass
class Measurement:
    produce_per_s: float
    p50_ms: float
    p99_ms: float
    consume_per_s: float


@dataclass
class Row:
    client: str
    security: str
    cluster: LocalCluster | None = None
    config: dict = field(default_factory=dict)
    rounds: list[Measurement] = field(default_factory=list)

    def median(self, name: str) -> float:
        return statistics.median(getattr(m, name) for m in self.rounds)


def create_topic(cluster: LocalCluster, topic: str) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **grpc_tls(cluster) if cluster.secure else {}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.wait_for_topic(topic, 30, partitions=1)


def measure_row(row: Row, round_index: int, values: list[bytes], args) -> Measurement:
    """One round of a row on a topic of its own: produce (after an untimed warm-up), latency, consume."""
    cluster, config, warm_up = row.cluster, row.config, warm_up_values(values)
    security = "".join(c if c.isalnum() else "-" for c in row.security.lower())
    topic = f"{'rdkafka' if row.client == RDKAFKA else 'grpc'}-{security}-{round_index}"
    create_topic(cluster, topic)
    # every record of the topic: the warm-up's, the timed run's (each with its warm-up record) and the latency run's
    total = len(warm_up) + len(values) + 2 + args.latency_records + 1
    if row.client == RDKAFKA:
        bootstrap = cluster.kafka_bootstrap_servers
        rdkafka_produce(bootstrap, topic, warm_up, config)
        produced = rdkafka_produce(bootstrap, topic, values, config)
        latencies = rdkafka_latency(bootstrap, topic, args.latency_records, config)
        consumed = rdkafka_consume(bootstrap, topic, total, args.batch, config).records_per_s
    else:
        bootstrap = cluster.bootstrap_servers
        producer_rate(bootstrap, topic, warm_up, **config)
        produced = producer_rate(bootstrap, topic, values, **config)
        latencies = odradek_latency(bootstrap, topic, args.latency_records, config)
        consumed = odradek_consume(bootstrap, topic, 0, total, args.batch, **config)
    found = Measurement(produced, percentile(latencies, 0.5), percentile(latencies, 0.99), consumed)
    print(f"  round {round_index + 1}: {row.client} {row.security}: produce {found.produce_per_s:,.0f}/s, "
          f"p50 {found.p50_ms:.2f} ms, p99 {found.p99_ms:.2f} ms, consume {found.consume_per_s:,.0f}/s", flush=True)
    return found


def start_cluster(stack: contextlib.ExitStack, base: Path, setup: Setup) -> LocalCluster:
    cluster = LocalCluster(base / setup.name, brokers=1, controllers=1, coordinators=0, free_ports=True,
                           secure=setup.secure, kafka_security_protocol=setup.kafka_protocol,
                           broker_config={"log.segment.bytes": 1 << 30})
    stack.callback(cluster.stop)
    print(f"{setup.name}: gRPC {'mutual TLS' if setup.secure else 'plaintext'}, Kafka listener "
          f"{setup.kafka_protocol}, ZooKeeper {'TLS' if cluster.zookeeper_tls else 'plaintext'}", flush=True)
    try:
        cluster.start()
    except BaseException:
        print(cluster.dump_logs(), flush=True)
        raise
    return cluster


def make_rows(clusters: dict[str, LocalCluster]) -> list[Row]:
    plain, secure, ssl = clusters["plaintext"], clusters["secure"], clusters["secure-ssl"]
    return [
        Row(RDKAFKA, "PLAINTEXT", plain),
        Row(RDKAFKA, "SSL (TLS)", ssl, rdkafka_security(ssl, "SSL")),
        Row(RDKAFKA, "SASL_SSL SCRAM-SHA-512", secure, rdkafka_security(secure, "SASL_SSL")),
        Row(GRPC, "plaintext", plain),
        Row(GRPC, "TLS (mutual)", secure, grpc_tls(secure)),
        Row(GRPC, "SASL_SSL SCRAM-SHA-512", secure, grpc_sasl(secure)),
    ]


# --------------------------------------------------------------------------------------------- report

def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base == base and base else "-"


def print_table(rows: list[Row]) -> None:
    print(f"\nmedians of the rounds; ratio: to the plaintext row of the same client\n"
          f"{'client':<28}{'security':<24}{'produce rec/s':>14}{'ratio':>7}{'p50 ms':>8}{'ratio':>7}"
          f"{'p99 ms':>8}{'ratio':>7}{'consume rec/s':>15}{'ratio':>7}")
    plaintext = {row.client: row for row in rows if row.security in ("PLAINTEXT", "plaintext")}
    for row in rows:
        base = plaintext[row.client]
        cells = "".join(f"{row.median(name):>{width},.{digits}f}{ratio(row.median(name), base.median(name)):>7}"
                        for name, width, digits in (("produce_per_s", 14, 0), ("p50_ms", 8, 2), ("p99_ms", 8, 2),
                                                    ("consume_per_s", 15, 0)))
        print(f"{row.client:<28}{row.security:<24}{cells}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000, help="records of each timed produce run")
    parser.add_argument("--latency-records", type=int, default=500, help="records sent one at a time")
    parser.add_argument("--batch", type=int, default=1000, help="librdkafka consume() batch, max.poll.records")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every row, the order alternating")
    args = parser.parse_args()
    values = make_values(args.records)
    print(f"{args.records} records of 100 B (+ a fifth as many untimed first), {args.latency_records} one at a "
          f"time, {args.rounds} rounds; one partition, RF 1; three clusters of 1 controller + 1 broker; "
          f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]}); "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="odradek-security-") as tmp, contextlib.ExitStack() as stack:
        clusters = {setup.name: start_cluster(stack, Path(tmp), setup) for setup in SETUPS}
        rows = make_rows(clusters)
        for round_index in range(args.rounds):
            for row in rows if round_index % 2 == 0 else reversed(rows):
                row.rounds.append(measure_row(row, round_index, values, args))
    print_table(rows)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
