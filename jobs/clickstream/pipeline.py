"""The whole clickstream pipeline against a running cluster's gateway: create the topics, generate
and send the traffic, run the streaming job to the end of the topic, run the backfill, and compare
both outputs with the aggregates computed from what was sent.

`PipelinePaths` lays a run's directories out under one base directory; `read_aggregates` reads
either job's Parquet back as `events.WindowAggregate` rows; `summary_table` prints the comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.clickstream import backfill, events, generator, streaming
from jobs.clickstream.connector import Connector
from services.clients.spark.gateway import GatewayClient, gateway_urls

DEFAULT_GATEWAY = "http://127.0.0.1:8080"
DEFAULT_PARTITIONS = 2


@dataclass(frozen=True)
class PipelinePaths:
    """A run's directories: the streaming job's Parquet and checkpoints, and the backfill's Parquet."""

    base: Path

    @property
    def streaming(self) -> Path:
        return self.base / "streaming"

    @property
    def checkpoints(self) -> Path:
        return self.base / "checkpoints"

    @property
    def backfill(self) -> Path:
        return self.base / "backfill"


def dead_letter_topic_of(topic: str) -> str:
    return f"{topic}-dead-letter"


def collect_aggregates(aggregates: Any) -> list[events.WindowAggregate]:
    """The rows of an aggregates DataFrame (`transform.AGGREGATE_COLUMNS`), sorted by window and page."""
    from pyspark.sql import functions as F

    rows = aggregates.select(F.unix_millis("window_start").alias("start"), "page", "page_views",
                             "unique_users").collect()
    return sorted(events.WindowAggregate(row.start, row.page, row.page_views, row.unique_users) for row in rows)


def read_aggregates(spark: Any, path: Path) -> list[events.WindowAggregate]:
    """A job's Parquet output, sorted by window and page."""
    return collect_aggregates(spark.read.parquet(str(path)))


def count_records(spark: Any, connector: Connector, topic: str) -> int:
    return backfill.read_topic(spark, connector, topic).count()


def summary_table(expected: list[events.WindowAggregate], streamed: list[events.WindowAggregate],
                  backfilled: list[events.WindowAggregate], dead_letters: int, malformed_sent: int) -> str:
    """The run's figures, one line per output, and whether the outputs agree window by window."""
    def line(name: str, rows: list[events.WindowAggregate]) -> str:
        return (f"{name:<22}{len(rows):>9}{sum(r.page_views for r in rows):>12}"
                f"{len({r.page for r in rows}):>8}{sum(r.unique_users for r in rows):>16}")

    def verdict(same: bool) -> str:
        return "yes, every window" if same else "NO"

    return "\n".join([
        f"{'':<22}{'windows':>9}{'page views':>12}{'pages':>8}{'unique users*':>16}",
        line("expected (generator)", expected),
        line("streaming", streamed),
        line("backfill", backfilled),
        "* summed over windows",
        f"dead-letter topic:  {dead_letters} records ({malformed_sent} malformed sent)",
        f"streaming == backfill:  {verdict(streamed == backfilled)}",
        f"streaming == expected:  {verdict(streamed == expected)}",
    ])


def run_pipeline(spark: Any, *, gateway: str, topic: str, base_dir: Path, events_count: int, seed: int,
                 start_ms: int, partitions: int = DEFAULT_PARTITIONS, late_share: float = 0.05,
                 malformed_share: float = 0.05, connector: Connector | None = None,
                 out: Callable[[str], None] = print) -> bool:
    """Runs every step (the topics made and the traffic sent through the gateway, the jobs on
    `connector`, by default the `odradek` source through the same gateway); returns whether both
    outputs equal the expected aggregates and the dead-letter topic holds exactly the malformed
    records."""
    connector = connector or Connector.odradek(gateway)
    paths = PipelinePaths(base_dir)
    dead_letter_topic = dead_letter_topic_of(topic)
    with GatewayClient(gateway_urls(gateway)) as client:
        for name in (topic, dead_letter_topic):
            created = generator.ensure_topic(client, name, partitions)
            out(f"topic {name}: {'created' if created else 'exists'}")
        sent = generator.generate_events(events_count, seed=seed, start_ms=start_ms, late_share=late_share,
                                         malformed_share=malformed_share)
        generator.send_records(client, topic, sent.records)
        out(f"sent {sent.summary()} to {topic}")
    streaming.run_streaming(spark, connector=connector, topic=topic, dead_letter_topic=dead_letter_topic,
                            output_dir=paths.streaming, checkpoint_dir=paths.checkpoints, out=out)
    backfill.run_backfill(spark, connector=connector, topic=topic, output_dir=paths.backfill, out=out)
    expected = events.expected_aggregates(sent.values())
    streamed, backfilled = read_aggregates(spark, paths.streaming), read_aggregates(spark, paths.backfill)
    dead_letters = count_records(spark, connector, dead_letter_topic)
    malformed = len(sent.malformed())
    out(summary_table(expected, streamed, backfilled, dead_letters, malformed))
    return streamed == backfilled == expected and dead_letters == malformed
