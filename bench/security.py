"""Benchmark: what TLS and SASL cost the Producer and the Consumer, against plaintext, in one run.

Three clusters laid out alike (the `LocalCluster` launcher: ZooKeeper, one controller, one broker,
free ports, a temp dir), started one after the other so each is measured alone on the machine:

1. plaintext: gRPC and the Kafka listener in plaintext;
2. `odradek dev up --secure`'s security: gRPC over mutual TLS, a SASL_SSL Kafka listener, the ACL
   authorizer on, ZooKeeper over TLS;
3. the same with an SSL Kafka listener (TLS with a client certificate, no SASL).

On each, one topic of one partition (replication factor 1) per client, and `--records` records of
100 bytes:

- librdkafka (confluent-kafka) on the Kafka listener: PLAINTEXT (1), SASL_SSL with SCRAM-SHA-512 as
  the SCRAM user `admin` (2), SSL with the administrator's certificate (3);
- Odradek's Producer and Consumer over gRPC: plaintext (1), TLS with the administrator's
  certificate (2); SASL over gRPC when the clients take `sasl.*` settings, else the row says why not.

Each row: the Producer's records/s (acks=all, `produce()`/`send()` of every record then `flush()`,
after an untimed warm-up of a fifth as many); its acks=all latency, p50 and p99 of `--latency-records`
records sent one at a time, each awaited (librdkafka with linger.ms=0); the Consumer's records/s
(assigned the partition from its beginning, every record read; librdkafka's clock starts at its
first batch, as in `bench/kafka_protocol.py`). Each figure is printed with its ratio to the
plaintext row of the same client, from this run.

    python bench/security.py [--records 50000] [--latency-records 500] [--batch 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import confluent_kafka  # noqa: E402
from kafka_protocol import make_values, rdkafka_consume, rdkafka_produce, warm_up_values  # noqa: E402
from peers import odradek_consume, percentile  # noqa: E402  (bench/peers.py)
from replication import producer_rate  # noqa: E402  (bench/replication.py: one plain producer loop)

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.client_config import CommonClientConfig  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402

RDKAFKA_TOPIC = "rdkafka"
GRPC_TOPIC = "grpc"
DELIVERY_TIMEOUT_S = 30.0


@dataclass
class Row:
    client: str
    security: str
    produce_per_s: float = float("nan")
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    consume_per_s: float = float("nan")
    skipped: str | None = None


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


def grpc_sasl(cluster: LocalCluster) -> dict[str, str] | str:
    """Odradek client keywords for SASL_SSL over gRPC, or why there are none."""
    if "sasl.mechanism" not in CommonClientConfig.settings():
        return "Odradek's clients take no sasl.* settings in this tree"
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

def measure(row: Row, produce: Callable[[], float], latency: Callable[[], list[float]],
            consume: Callable[[], float]) -> Row:
    row.produce_per_s = produce()
    latencies = latency()
    row.p50_ms, row.p99_ms = percentile(latencies, 0.5), percentile(latencies, 0.99)
    row.consume_per_s = consume()
    print(f"  {row.client} {row.security}: produce {row.produce_per_s:,.0f}/s, p50 {row.p50_ms:.2f} ms, "
          f"p99 {row.p99_ms:.2f} ms, consume {row.consume_per_s:,.0f}/s", flush=True)
    return row


def rdkafka_row(cluster: LocalCluster, setup: Setup, values: list[bytes], args) -> Row:
    bootstrap, config = cluster.kafka_bootstrap_servers, rdkafka_security(cluster, setup.kafka_protocol)
    label = {"PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SASL_SSL SCRAM-SHA-512", "SSL": "SSL (TLS)"}[setup.kafka_protocol]
    warm_up = warm_up_values(values)

    def produce() -> float:
        rdkafka_produce(bootstrap, RDKAFKA_TOPIC, warm_up, config)
        return rdkafka_produce(bootstrap, RDKAFKA_TOPIC, values, config)

    # every record of the topic: the warm-up's, the timed run's (each with its warm-up record) and the latency run's
    total = len(warm_up) + len(values) + 2 + args.latency_records + 1
    return measure(Row("librdkafka, Kafka listener", label), produce,
                   lambda: rdkafka_latency(bootstrap, RDKAFKA_TOPIC, args.latency_records, config),
                   lambda: rdkafka_consume(bootstrap, RDKAFKA_TOPIC, total, args.batch, config).records_per_s)


def grpc_row(cluster: LocalCluster, label: str, config: dict | str, values: list[bytes], args) -> Row:
    row = Row("Odradek clients, gRPC", label)
    if isinstance(config, str):
        row.skipped = config
        print(f"  {row.client} {label}: skipped: {config}", flush=True)
        return row
    bootstrap, topic = cluster.bootstrap_servers, f"{GRPC_TOPIC}-{label.split()[0].lower()}"
    with Admin(bootstrap_servers=bootstrap, **grpc_tls(cluster) if cluster.secure else {}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.wait_for_topic(topic, 30, partitions=1)
    warm_up = warm_up_values(values)

    def produce() -> float:
        producer_rate(bootstrap, topic, warm_up, **config)
        return producer_rate(bootstrap, topic, values, **config)

    total = len(warm_up) + len(values) + 2 + args.latency_records + 1
    return measure(row, produce, lambda: odradek_latency(bootstrap, topic, args.latency_records, config),
                   lambda: odradek_consume(bootstrap, topic, 0, total, args.batch, **config))


def run_setup(setup: Setup, base: Path, values: list[bytes], args) -> list[Row]:
    cluster = LocalCluster(base / setup.name, brokers=1, controllers=1, coordinators=0, free_ports=True,
                           secure=setup.secure, kafka_security_protocol=setup.kafka_protocol,
                           broker_config={"log.segment.bytes": 1 << 30})
    print(f"{setup.name}: gRPC {'mutual TLS' if setup.secure else 'plaintext'}, Kafka listener "
          f"{setup.kafka_protocol}, ZooKeeper {'TLS' if cluster.zookeeper_tls else 'plaintext'}", flush=True)
    try:
        cluster.start()
        admin_config = grpc_tls(cluster) if setup.secure else {}
        with Admin(bootstrap_servers=cluster.bootstrap_servers, **admin_config) as admin:
            admin.create_topics([NewTopic(RDKAFKA_TOPIC, 1, 1)])
            admin.wait_for_topic(RDKAFKA_TOPIC, 30, partitions=1)
        rows = [rdkafka_row(cluster, setup, values, args)]
        if setup.name == "plaintext":
            rows.append(grpc_row(cluster, "plaintext", {}, values, args))
        elif setup.kafka_protocol == "SASL_SSL":
            rows.append(grpc_row(cluster, "TLS (mutual)", grpc_tls(cluster), values, args))
            rows.append(grpc_row(cluster, "SASL_SSL SCRAM-SHA-512", grpc_sasl(cluster), values, args))
        return rows
    except BaseException:
        print(cluster.dump_logs(), flush=True)
        raise
    finally:
        cluster.stop()


# --------------------------------------------------------------------------------------------- report

def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base == base and base else "-"


def print_table(rows: list[Row]) -> None:
    print(f"\n{'client':<28}{'security':<24}{'produce rec/s':>14}{'ratio':>7}{'p50 ms':>8}{'ratio':>7}"
          f"{'p99 ms':>8}{'ratio':>7}{'consume rec/s':>15}{'ratio':>7}")
    plaintext = {row.client: row for row in rows if row.security in ("PLAINTEXT", "plaintext")}
    for row in rows:
        if row.skipped:
            print(f"{row.client:<28}{row.security:<24}skipped: {row.skipped}")
            continue
        base = plaintext[row.client]
        print(f"{row.client:<28}{row.security:<24}"
              f"{row.produce_per_s:>14,.0f}{ratio(row.produce_per_s, base.produce_per_s):>7}"
              f"{row.p50_ms:>8.2f}{ratio(row.p50_ms, base.p50_ms):>7}"
              f"{row.p99_ms:>8.2f}{ratio(row.p99_ms, base.p99_ms):>7}"
              f"{row.consume_per_s:>15,.0f}{ratio(row.consume_per_s, base.consume_per_s):>7}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000, help="records of the timed produce run")
    parser.add_argument("--latency-records", type=int, default=500, help="records sent one at a time")
    parser.add_argument("--batch", type=int, default=1000, help="librdkafka consume() batch, max.poll.records")
    args = parser.parse_args()
    values = make_values(args.records)
    print(f"{args.records} records of 100 B (+ a fifth as many untimed first), {args.latency_records} one at a time; "
          f"one partition, RF 1, 1 controller + 1 broker per cluster; confluent-kafka {confluent_kafka.version()[0]} "
          f"(librdkafka {confluent_kafka.libversion()[0]}); load average {os.getloadavg()[0]:.2f}", flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="odradek-security-") as tmp:
        for setup in SETUPS:
            rows.extend(run_setup(setup, Path(tmp), values, args))
    rank = {"PLAINTEXT": 0, "plaintext": 0, "SSL (TLS)": 1, "TLS (mutual)": 1, "SASL_SSL SCRAM-SHA-512": 2}
    rows.sort(key=lambda row: (row.client != "librdkafka, Kafka listener", rank[row.security]))
    print_table(rows)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
