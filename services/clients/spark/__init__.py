"""The PySpark data source `odradek`: Spark's Kafka source and sink, through the HTTP gateway.

`spark.read.format("odradek")`, `spark.readStream.format("odradek")`, `df.write.format("odradek")`
and `df.writeStream.format("odradek")` take Spark's Kafka option names, with `gateway` (a comma
separated list of gateway URLs) in place of `kafka.bootstrap.servers`. A session knows the format
once `register(spark)` has registered it. Applications import these as `odradek.spark`.

Modules: `source` (the DataSource), `options` (option parsing and checks), `gateway` (the HTTP
client), `batch_reader`, `stream_reader`, `writer`, and for the exactly-once streaming sink
`exactly_once` (its decisions), `batch_log` (its batch records) and `txn_sink` (its transactions).
"""

from __future__ import annotations

from typing import Any

FORMAT = "odradek"


def register(spark: Any) -> None:
    """Registers the `odradek` format with a SparkSession, telling it the session's default
    parallelism (batch reads pack their offset ranges into that many tasks by default)."""
    from services.clients.spark.source import with_parallelism

    spark.dataSource.register(with_parallelism(default_parallelism(spark)))


def default_parallelism(spark: Any) -> int | None:
    """`spark.sparkContext.defaultParallelism`, or None where the session has no SparkContext
    (Spark Connect)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect raises its own error types for sparkContext
        return None
