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
    """`format("odradek")`: reads and writes topics through the gateway, as Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        if include_headers(self.options):
            return f"{KAFKA_SOURCE_SCHEMA}, {HEADERS_FIELD}"
        return KAFKA_SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from services.clients.spark.batch_reader import OdradekBatchReader

        return OdradekBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from services.clients.spark.stream_reader import OdradekStreamReader

        return OdradekStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from services.clients.spark.writer import OdradekBatchWriter

        return OdradekBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from services.clients.spark.writer import OdradekStreamWriter

        return OdradekStreamWriter(dict(self.options), schema)
