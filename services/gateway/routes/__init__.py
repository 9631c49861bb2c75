"""The gateway's routers, one module per resource: `topics_v2` (v2 topics, partitions, brokers,
produce), `consumers_v2` (v2 consumer instances), `v3` (clusters, topics, records, consumer groups)
and `ranges` (offset-range reads in JSON or Arrow, for Spark)."""

from services.gateway.routes import consumers_v2, ranges, topics_v2, v3

MODULES = (topics_v2, consumers_v2, v3, ranges)
