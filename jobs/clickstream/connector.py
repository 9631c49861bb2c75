"""Where the clickstream jobs read and write their topics: `Connector.odradek` (Odradek's `odradek`
Spark data source, through the gateway) or `Connector.kafka` (Spark's own Kafka connector,
spark-sql-kafka-0-10, through the brokers' Kafka listeners). The two take the same options
(subscribe, startingOffsets, endingOffsets, topic) and give and take the same columns (key, value,
headers), so a job differs only in the format and the option that says where the cluster is.
Spark's connector must be on the session's classpath: `kafka_connector_jars` finds its jars."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.clients.spark import FORMAT

KAFKA_FORMAT = "kafka"
NAMES = (FORMAT, KAFKA_FORMAT)
# the brokers' Kafka listeners of `make up`
DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:19092,127.0.0.1:19192,127.0.0.1:19292"


@dataclass(frozen=True)
class Connector:
    format: str
    options: tuple[tuple[str, str], ...]

    @classmethod
    def odradek(cls, gateway: str) -> Connector:
        return cls(FORMAT, (("gateway", gateway),))

    @classmethod
    def kafka(cls, bootstrap_servers: str = DEFAULT_BOOTSTRAP_SERVERS) -> Connector:
        return cls(KAFKA_FORMAT, (("kafka.bootstrap.servers", bootstrap_servers),))

    @classmethod
    def named(cls, name: str, *, gateway: str, bootstrap_servers: str = DEFAULT_BOOTSTRAP_SERVERS) -> Connector:
        if name == KAFKA_FORMAT:
            return cls.kafka(bootstrap_servers)
        if name == FORMAT:
            return cls.odradek(gateway)
        raise ValueError(f"no connector {name!r}: {', '.join(NAMES)}")

    def apply(self, reader_or_writer: Any) -> Any:
        """A DataFrame(Stream)Reader or Writer set to this connector's format and options."""
        configured = reader_or_writer.format(self.format)
        for key, value in self.options:
            configured = configured.option(key, value)
        return configured


def kafka_connector_jars() -> list[str]:
    """The jars of Spark's Kafka connector for the installed PySpark, fetched from Maven Central the
    first time by the checkout's `bench/kafka_peer.py`; outside a checkout, pass them (`--jars`)."""
    try:
        from bench.kafka_peer import fetch_spark_kafka_jars, spark_kafka_jar_paths
    except ImportError as exc:
        raise RuntimeError("Spark's Kafka connector: pass its jars with --jars (comma separated)") from exc
    return spark_kafka_jar_paths(fetch_spark_kafka_jars())
