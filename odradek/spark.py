"""The Spark data source `odradek`: Spark's Kafka source and sink, through Odradek's HTTP gateway.

    from odradek.spark import register
    register(spark)
    frame = spark.read.format("odradek").option("gateway", url).option("subscribe", "events").load()

`register(spark)` registers `OdradekDataSource` with a SparkSession under the name `FORMAT`
("odradek"); a session knows the format only once it is registered. The options are Spark's
Kafka options, with `gateway` (comma separated gateway URLs) in place of
`kafka.bootstrap.servers`. Needs PySpark (`pip install 'odradek[spark]'`), which importing
this module imports.
"""

from services.clients.spark import FORMAT, register
from services.clients.spark.source import OdradekDataSource

__all__ = ["FORMAT", "OdradekDataSource", "register"]
