"""The clickstream jobs' DataFrame steps, shared by the streaming and the backfill job: parsing a
topic's records into events with a dead-letter reason (the rules of `events`, in Spark), the dead
letters as records for the `odradek` sink, and the per-page per-minute aggregation.

Unique users are counted exactly as the size of the window's set of user ids (`collect_set`):
`count_distinct` is refused in streaming aggregations, and `approx_count_distinct` is a
HyperLogLog++ estimate that is not guaranteed exact even for small counts. The set's state lives
only while its window is open (three windows per page at most under the two-minute watermark), so
it stays as small as a minute's distinct users of a page.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.clickstream import events

AGGREGATE_COLUMNS = ("window_start", "window_end", "page", "page_views", "unique_users", "date")


def dead_letter_reason(event: Column) -> Column:
    """The reason a parsed event is dead-lettered (null when it is valid), as `events.read_event`."""
    unreadable = F.lit(True)
    for field in events.EVENT_FIELDS:
        unreadable = unreadable & event[field].isNull()
    reason = F.when(unreadable, F.lit(events.UNPARSEABLE))
    for field in events.REQUIRED_FIELDS:
        reason = reason.when(event[field].isNull() | (event[field] == ""), F.lit(events.missing(field)))
    reason = reason.when(~event["page"].startswith(events.PAGE_PREFIX), F.lit(events.BAD_PAGE))
    good_time = (event["event_time"].rlike(events.EVENT_TIME_REGEX)
                 & F.try_to_timestamp(event["event_time"], F.lit(events.EVENT_TIME_SPARK_PATTERN)).isNotNull())
    return reason.when(~good_time, F.lit(events.BAD_EVENT_TIME))


def parse_events(records: DataFrame) -> DataFrame:
    """`records` (the `odradek` source's columns) with `event` (the parsed JSON), `event_time`
    (a timestamp) and `reason` (null for a valid event)."""
    event = F.from_json(F.col("value").cast("string"), events.EVENT_SCHEMA_DDL)
    parsed = records.select("key", "value", event.alias("event"))
    return parsed.select(
        "key", "value", "event",
        F.try_to_timestamp(F.col("event.event_time"), F.lit(events.EVENT_TIME_SPARK_PATTERN)).alias("event_time"),
        dead_letter_reason(F.col("event")).alias("reason"))


def page_views(parsed: DataFrame) -> DataFrame:
    """The valid events: user_id, page, event_time."""
    return parsed.where(F.col("reason").isNull()).select("event.user_id", "event.page", "event_time")


def dead_letters(parsed: DataFrame) -> DataFrame:
    """The invalid records for the dead-letter topic: their original key and value, and a header
    naming the reason."""
    header = F.struct(F.lit(events.DEAD_LETTER_REASON_HEADER).alias("key"),
                      F.encode(F.col("reason"), "UTF-8").alias("value"))
    return parsed.where(F.col("reason").isNotNull()).select("key", "value", F.array(header).alias("headers"))


def aggregate_page_views(views: DataFrame) -> DataFrame:
    """Page views and unique users per page per one-minute window (`AGGREGATE_COLUMNS`); `date` is
    the UTC date of the window's start."""
    counted = views.groupBy(F.window("event_time", events.WINDOW_DURATION).alias("window"), "page").agg(
        F.count(F.lit(1)).alias("page_views"), F.size(F.collect_set("user_id")).alias("unique_users"))
    return counted.select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                          "page", "page_views", "unique_users", F.to_date(F.col("window.start")).alias("date"))


def closed_windows(aggregates: DataFrame, views: DataFrame) -> DataFrame:
    """The windows of `aggregates` (of `views`, a batch) that a streaming run in append mode has
    written once it has seen every view: those the watermark, the largest event time less the
    delay, has passed."""
    watermark = views.agg((F.max("event_time") - F.expr(f"INTERVAL {events.WATERMARK_DELAY}")).alias("watermark"))
    return aggregates.crossJoin(watermark).where(F.col("window_end") <= F.col("watermark")).select(*AGGREGATE_COLUMNS)
