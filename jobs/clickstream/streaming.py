"""The clickstream's Structured Streaming job: a topic's page-view events, read from the earliest
offset through the `odradek` source (or Spark's own Kafka connector: `connector`), become per-page
per-minute aggregates in Parquet (partitioned by `date`, append mode, two-minute watermark) and
dead letters in a topic.

Two queries read the topic, each with its own checkpoint under `checkpoint_dir`: `aggregates`
(valid events -> Parquet under `output_dir`) and `dead-letters` (invalid records -> the dead-letter
topic through the same connector's sink, original key and value, a `dead-letter-reason` header). By default
they run with `trigger(availableNow=True)`: they read what the topic holds, write every window the
watermark closes and stop; with `processing_time` they keep running, one micro-batch per interval,
until asked to stop.
Each query's progress (records read, rows written per micro-batch) is printed as it comes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.clickstream import events, transform
from jobs.clickstream.connector import Connector

PROGRESS_POLL_S = 1.0
AGGREGATES, DEAD_LETTERS = "aggregates", "dead-letters"


def read_topic_stream(spark: Any, connector: Connector, topic: str) -> Any:
    return connector.apply(spark.readStream).option("subscribe", topic).option("startingOffsets", "earliest").load()


@dataclass
class QueryProgress:
    """Totals of one query's micro-batches."""

    batches: int = 0
    records_read: int = 0
    rows_written: int = 0
    seen: set[int] = field(default_factory=set)

    def add(self, progress: dict[str, Any]) -> str | None:
        """Counts a progress report once; returns its line, or None when it was counted already."""
        batch_id = progress["batchId"]
        if batch_id in self.seen:
            return None
        self.seen.add(batch_id)
        read = int(progress.get("numInputRows") or 0)
        written = int((progress.get("sink") or {}).get("numOutputRows", -1))
        if written < 0 and progress.get("stateOperators"):  # append mode writes the rows it evicts
            written = sum(int(operator.get("numRowsRemoved", 0)) for operator in progress["stateOperators"])
        self.batches += 1
        self.records_read += read
        self.rows_written += max(written, 0)
        watermark = (progress.get("eventTime") or {}).get("watermark")
        line = f"batch {batch_id}: {read} records read"
        if written >= 0:
            line += f", {written} rows written"
        return line + (f", watermark {watermark}" if watermark else "")


def start_queries(spark: Any, *, connector: Connector, topic: str, dead_letter_topic: str, output_dir: Path,
                  checkpoint_dir: Path, processing_time: str | None = None) -> dict[str, Any]:
    """Starts both queries; returns them by name."""
    parsed = transform.parse_events(read_topic_stream(spark, connector, topic))
    views = transform.page_views(parsed).withWatermark("event_time", events.WATERMARK_DELAY)
    aggregates = (transform.aggregate_page_views(views).writeStream.queryName(AGGREGATES).format("parquet")
                  .outputMode("append").partitionBy("date").option("path", str(output_dir))
                  .option("checkpointLocation", str(checkpoint_dir / AGGREGATES)))
    dead_letters = (connector.apply(transform.dead_letters(parsed).writeStream.queryName(DEAD_LETTERS))
                    .option("topic", dead_letter_topic)
                    .option("checkpointLocation", str(checkpoint_dir / DEAD_LETTERS)))
    queries = {}
    for name, writer in ((AGGREGATES, aggregates), (DEAD_LETTERS, dead_letters)):
        triggered = writer.trigger(processingTime=processing_time) if processing_time else \
            writer.trigger(availableNow=True)
        queries[name] = triggered.start()
    return queries


def await_queries(queries: dict[str, Any], out: Callable[[str], None] = print,
                  stop: threading.Event | None = None) -> dict[str, QueryProgress]:
    """Prints each query's progress until every query has stopped (with a processing-time trigger,
    until `stop` is set); raises a query's failure."""
    stop = stop or threading.Event()
    totals = {name: QueryProgress() for name in queries}

    def report() -> None:
        for name, query in queries.items():
            for progress in query.recentProgress:
                line = totals[name].add(progress)
                if line:
                    out(f"[{name}] {line}")

    try:
        while not stop.is_set() and any(query.isActive for query in queries.values()):
            for query in queries.values():
                if query.isActive:
                    query.awaitTermination(PROGRESS_POLL_S)
            report()
    finally:
        for query in queries.values():
            if query.isActive:
                query.stop()
    for query in queries.values():
        query.awaitTermination()  # raises the query's failure, if it failed
    report()
    return totals


def run_streaming(spark: Any, *, connector: Connector, topic: str, dead_letter_topic: str, output_dir: Path,
                  checkpoint_dir: Path, processing_time: str | None = None,
                  out: Callable[[str], None] = print, stop: threading.Event | None = None) -> dict[str, QueryProgress]:
    """Runs the job (to the end of the topic, or with `processing_time` until `stop` is set);
    returns its totals."""
    queries = start_queries(spark, connector=connector, topic=topic, dead_letter_topic=dead_letter_topic,
                            output_dir=output_dir, checkpoint_dir=checkpoint_dir, processing_time=processing_time)
    totals = await_queries(queries, out, stop)
    for name, total in totals.items():
        out(f"[{name}] {total.batches} batches, {total.records_read} records read, {total.rows_written} rows written")
    return totals
