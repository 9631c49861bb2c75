"""The `odradek` DataSource: Spark's Kafka source schema, and the readers and writers by mode."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from services.clients.spark import FORMAT

KAFKA_SOURCE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
                       "timestamp timestamp, timestampType int")
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"


def include_headers(options: dict[str, str]) -> bool:
    return str(options.get("includeHeaders", "false")).strip().lower() == "true"


class OdradekDataSource(DataSource):
    """`format("odradek")`: reads and writes topics through the gateway, as Spark's Kafka source.

    `default_parallelism` is Spark's default parallelism when `with_parallelism` made the class (the
    planner runs in a Python worker that cannot ask Spark): batch reads then pack their offset ranges
    into that many tasks unless `minPartitions` or `maxPartitions` is given."""

    default_parallelism: int | None = None

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        if include_headers(self.options):
            return f"{KAFKA_SOURCE_SCHEMA}, {HEADERS_FIELD}"
        return KAFKA_SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from services.clients.spark.batch_reader import OdradekBatchReader

        return OdradekBatchReader(dict(self.options), schema, self.default_parallelism)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from services.clients.spark.stream_reader import OdradekStreamReader

        return OdradekStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from services.clients.spark.writer import OdradekBatchWriter

        return OdradekBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from services.clients.spark.writer import OdradekStreamWriter

        return OdradekStreamWriter(dict(self.options), schema)


def with_parallelism(parallelism: int | None) -> type[OdradekDataSource]:
    """The data source class carrying Spark's default parallelism to its planner (a class made here
    travels to Spark's Python workers by value, with the number in it)."""
    if not parallelism or parallelism < 1:
        return OdradekDataSource
    return type("OdradekDataSource", (OdradekDataSource,), {
        "default_parallelism": int(parallelism),
        "__qualname__": f"OdradekDataSource.with_parallelism({int(parallelism)})",
        "__doc__": OdradekDataSource.__doc__,
    })
