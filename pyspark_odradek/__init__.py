"""Lets Spark find the `odradek` data source by itself: PySpark registers the `DefaultSource` of
every installed top-level package whose name starts with `pyspark_`."""

from services.clients.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
