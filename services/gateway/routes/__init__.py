"""The gateway's routers, one module per resource: `topics_v2` (v2 topics, partitions, brokers,
produce), `consumers_v2` (v2 consumer instances), `v3` (clusters, topics, records, consumer groups),
`ranges` (offset-range reads in JSON or Arrow, for Spark), `offsets` (a topic's offsets per
partition), `arrow_produce` (produce of Arrow IPC streams, for Spark) and `ui` (the web console)."""

from services.gateway.routes import arrow_produce, consumers_v2, offsets, ranges, topics_v2, ui, v3

MODULES = (topics_v2, consumers_v2, v3, ranges, offsets, arrow_produce, ui)
