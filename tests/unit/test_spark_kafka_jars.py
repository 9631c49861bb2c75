"""Which release of Spark's Kafka connector `bench.kafka_peer` asks Maven for, and how it reads back
the version it fetched and the jars `spark.jars` is given."""

from __future__ import annotations

from pathlib import Path

from bench.kafka_peer import (
    SPARK_KAFKA_ARTIFACTS,
    spark_connector_version,
    spark_connector_versions,
    spark_kafka_jar_paths,
)


def test_spark_own_version_first_then_the_previous_minor_release():
    assert spark_connector_versions("4.3.0") == ["4.3.0", "4.2.0"]
    assert spark_connector_versions("3.5.2") == ["3.5.2", "3.4.0"]
    assert spark_connector_versions("4.0.1") == ["4.0.1"]


def test_the_fetched_version_and_jars(tmp_path: Path):
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0-preview5.jar", "kafka-clients-3.9.2.jar",
                 "commons-pool2-2.13.1.jar", ".complete"):
        (tmp_path / name).write_text("")
    assert spark_connector_version(tmp_path) == "4.2.0-preview5"
    assert [Path(jar).name for jar in spark_kafka_jar_paths(tmp_path)] == [
        "commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0-preview5.jar"]


def test_only_what_pyspark_does_not_ship_is_copied():
    assert {"kafka-clients", "commons-pool2", "spark-sql-kafka-0-10_2.13",
            "spark-token-provider-kafka-0-10_2.13"} <= set(SPARK_KAFKA_ARTIFACTS)
    assert not any(name.startswith(("scala-", "hadoop-", "lz4", "snappy", "slf4j")) for name in SPARK_KAFKA_ARTIFACTS)
