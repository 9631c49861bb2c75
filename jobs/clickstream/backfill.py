"""The clickstream's backfill: the streaming job's aggregates, recomputed in one batch from the
topic's earliest to its latest offsets (the same parsing and aggregation, `transform`), and written
over `output_dir` as Parquet partitioned by `date`. It writes the windows the streaming job has
written once it has read the same records: those the watermark has closed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobs.clickstream import transform
from jobs.clickstream.connector import Connector


def read_topic(spark: Any, connector: Connector, topic: str) -> Any:
    return (connector.apply(spark.read).option("subscribe", topic).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load())


def run_backfill(spark: Any, *, connector: Connector, topic: str, output_dir: Path,
                 out: Callable[[str], None] = print) -> int:
    """Rewrites `output_dir`; returns the number of windows written."""
    parsed = transform.parse_events(read_topic(spark, connector, topic)).cache()
    try:
        views = transform.page_views(parsed)
        aggregates = transform.closed_windows(transform.aggregate_page_views(views), views).cache()
        aggregates.write.mode("overwrite").partitionBy("date").parquet(str(output_dir))
        windows = aggregates.count()
        aggregates.unpersist()
        out(f"[backfill] {parsed.count()} records read, {windows} windows written to {output_dir}")
        return windows
    finally:
        parsed.unpersist()
