"""A streaming query for the exactly-once sink test, run as its own driver process:
`python -m tests.spark.eos_sink_driver GATEWAY INPUT OUTPUT CHECKPOINT (run|available-now) [MASTER]`.

It reads INPUT through `odradek` (read_committed, from the earliest offsets) and writes key and
value to OUTPUT through the exactly-once sink, with Spark local[2] or on MASTER (a standalone
cluster's spark://host:port). `run` reads 40 records a trigger
and goes on until the process is killed; `available-now` first finishes the batch a killed run left
planned (its offsets as logged), then reads all the rest in one batch, and exits 0."""

from __future__ import annotations

import sys

from odradek.spark import register
from services.clients.spark.session import job_session

MAX_OFFSETS_PER_TRIGGER = "40"


def main(gateway: str, source: str, target: str, checkpoint: str, mode: str, master: str = "local[2]") -> int:
    spark = job_session("odradek-eos-sink", master=master, conf={"spark.sql.shuffle.partitions": "2"})
    register(spark)
    reader = (spark.readStream.format("odradek").option("gateway", gateway).option("subscribe", source)
              .option("startingOffsets", "earliest").option("isolationLevel", "read_committed"))
    if mode == "run":
        reader = reader.option("maxOffsetsPerTrigger", MAX_OFFSETS_PER_TRIGGER)
    stream = reader.load()
    writer = (stream.selectExpr("key", "value").writeStream.format("odradek").option("gateway", gateway)
              .option("topic", target).option("exactlyOnce", "true").option("checkpointLocation", checkpoint))
    trigger = {"availableNow": True} if mode == "available-now" else {"processingTime": "200 milliseconds"}
    query = writer.trigger(**trigger).start()
    query.awaitTermination()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
