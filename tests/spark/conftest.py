"""Spark tests: one local[2] SparkSession per test module (starting the JVM is what costs), against a
real cluster with a real uvicorn gateway (`tests.integration.conftest.gateway_module_cluster`).
Every session has Spark's own Kafka connector on its classpath when its jars can be fetched
(`bench.kafka_peer.fetch_spark_kafka_jars`; `make test` fetches them first): the JVM of the first
session is the JVM of them all, and only jars given when it starts are on the driver's classpath."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from bench.kafka_peer import KafkaJarsUnavailable, fetch_spark_kafka_jars, spark_kafka_jar_paths
from odradek.spark import register
from services.clients.spark.session import local_session


@functools.cache
def spark_kafka_jars() -> tuple[str, ...]:
    """The jars of Spark's Kafka connector, or none when they cannot be fetched here."""
    try:
        return tuple(spark_kafka_jar_paths(fetch_spark_kafka_jars()))
    except KafkaJarsUnavailable:
        return ()


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    conf = {"spark.sql.warehouse.dir": str(warehouse), "spark.sql.shuffle.partitions": "2"}
    if spark_kafka_jars():
        conf["spark.jars"] = ",".join(spark_kafka_jars())
    session = local_session("odradek-tests", conf=conf)
    register(session)
    try:
        yield session
    finally:
        session.stop()
