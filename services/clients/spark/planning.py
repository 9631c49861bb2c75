"""Planning and reading offset ranges, shared by the batch and streaming readers.

On the driver: `Planner` asks the gateway which partitions the subscription covers and their
offsets (`GET .../topics/{t}/offsets`, one request per topic), turns a starting or ending
`OffsetBound` into an offset per partition, and `offset_ranges` cuts [start, end) per partition into
`OffsetRange` input partitions, split further when `minPartitions` asks for more tasks than there
are partitions (by range size, as Spark's Kafka source does).

In a task: `read_range` reads one `OffsetRange` from the gateway's range endpoint as Arrow IPC
streams, page by page with the next page requested while Spark takes the current one, and yields
pyarrow record batches as they arrive (no Python object per record), reporting
data loss (a range starting before the partition's earliest offset, or offsets that no longer exist)
as Spark's Kafka source does: an error when `failOnDataLoss`, else a warning and the records that
remain.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from services.clients.spark.gateway import GatewayClient
from services.clients.spark.options import EARLIEST, LATEST, OffsetBound, OffsetSpec, ReadOptions
from services.common.errors import Errors, KafkaError
from services.common.http_wire import ARROW_STREAM, EARLIEST_HEADER, NEXT_OFFSET_HEADER

logger = logging.getLogger(__name__)

FIRST_PAGE_BYTES = 1024 * 1024

TopicPartitionKey = tuple[str, int]
DATA_LOSS_HINT = ("Some data may have been lost because it is not available in Odradek any more: it was removed "
                  "by retention or the topic was deleted before all of it was read. If you want the query to go on "
                  "in such cases, set the source option 'failOnDataLoss' to 'false'.")


class DataLossError(RuntimeError):
    """Offsets a read needed are gone (with `failOnDataLoss`)."""


@dataclass(frozen=True)
class PartitionOffsets:
    earliest: int
    latest: int
    timestamp_offset: int | None = None


@dataclass(frozen=True)
class ReadSettings:
    """What a task needs of the options (picklable, small)."""

    gateway: tuple[str, ...]
    cluster_id: str
    include_headers: bool
    fail_on_data_loss: bool
    isolation_level: str
    max_bytes_per_request: int
    timeout_s: float
    authorization: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, options: ReadOptions, cluster_id: str) -> ReadSettings:
        return cls(options.gateway, cluster_id, options.include_headers, options.fail_on_data_loss,
                   options.isolation_level, options.max_bytes_per_request, options.timeout_s, options.authorization)


class OffsetRange(InputPartition):
    """Offsets [from_offset, until_offset) of one partition, read by one task."""

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int,
                 settings: ReadSettings) -> None:
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset
        self.until_offset = until_offset
        self.settings = settings

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    if fail_on_data_loss:
        raise DataLossError(f"{message} {DATA_LOSS_HINT}")
    logger.warning("%s Some data may have been lost.", message)


class Planner:
    """The driver's view of the subscription's partitions and offsets, through one GatewayClient."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.client = GatewayClient(options.gateway, options.timeout_s, authorization=options.authorization)

    def close(self) -> None:
        self.client.close()

    @property
    def settings(self) -> ReadSettings:
        return ReadSettings.of(self.options, self.client.cluster_id)

    def topics(self) -> list[str]:
        subscription = self.options.subscription
        if subscription.pattern is not None:
            listed = self.client.get_json(self.client.cluster_path("/topics"))["data"]
            return sorted(entry["topic_name"] for entry in listed
                          if not entry.get("is_internal") and subscription.matches(entry["topic_name"]))
        if subscription.assigned:
            return list(dict.fromkeys(topic for topic, _ in subscription.assigned))
        return list(subscription.topics)

    def topic_offsets(self, topic: str, timestamp: int | None = None) -> dict[int, PartitionOffsets] | None:
        """The topic's partitions and offsets; None when there is no such topic."""
        params: dict[str, Any] = {"isolation_level": self.options.isolation_level}
        if timestamp is not None:
            params["timestamp"] = timestamp
        try:
            answer = self.client.get_json(self.client.cluster_path(f"/topics/{quote(topic, safe='')}/offsets"),
                                          params)
        except KafkaError as error:
            if error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
                return None
            raise
        return {entry["partition"]: PartitionOffsets(entry["earliest_offset"], entry["latest_offset"],
                                                     entry.get("timestamp_offset"))
                for entry in answer["partitions"]}

    def partition_offsets(self) -> dict[TopicPartitionKey, PartitionOffsets]:
        """Every partition the subscription covers now, with its offsets."""
        subscription = self.options.subscription
        found: dict[TopicPartitionKey, PartitionOffsets] = {}
        for topic in self.topics():
            offsets = self.topic_offsets(topic)
            for partition, partition_offsets in (offsets or {}).items():
                found[(topic, partition)] = partition_offsets
        if subscription.assigned:
            missing = [f"{topic}-{partition}" for topic, partition in subscription.assigned
                       if (topic, partition) not in found]
            if missing:
                raise KafkaError.from_code(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                           f"assigned partition(s) {', '.join(missing)} do not exist")
            found = {tp: found[tp] for tp in subscription.assigned}
        return found

    def resolve(self, bound: OffsetBound, offsets: dict[TopicPartitionKey, PartitionOffsets],
                what: str) -> dict[TopicPartitionKey, int]:
        """An offset per partition of `offsets` for a starting or ending bound (`what` names it)."""
        if bound.specific:
            named, covered = set(bound.per_partition), set(offsets)
            if named != covered:
                raise ValueError(
                    f"{what} names specific offsets: it must name every partition read, and only those. "
                    f"Named: {_names(named)}; read: {_names(covered)}. Use -2 for earliest, -1 for latest.")
        resolved: dict[TopicPartitionKey, int] = {}
        by_timestamp: dict[tuple[str, int], list[TopicPartitionKey]] = {}
        for tp, partition_offsets in offsets.items():
            spec: OffsetSpec | None = bound.spec_for(*tp)
            if isinstance(spec, tuple):
                by_timestamp.setdefault((tp[0], spec[1]), []).append(tp)
            elif spec == EARLIEST:
                resolved[tp] = partition_offsets.earliest
            elif spec == LATEST or spec is None:
                resolved[tp] = partition_offsets.latest
            else:
                resolved[tp] = int(spec)
        for (topic, stamp), tps in by_timestamp.items():
            at_stamp = self.topic_offsets(topic, stamp) or {}
            for tp in tps:
                found = at_stamp.get(tp[1])
                if found is not None and found.timestamp_offset is not None:
                    resolved[tp] = found.timestamp_offset
                elif bound.strategy == "latest":
                    resolved[tp] = offsets[tp].latest
                else:
                    raise ValueError(f"{what}: no record of {tp[0]}-{tp[1]} has a timestamp at or after {stamp}. "
                                     "Set 'startingOffsetsByTimestampStrategy' to 'latest' to start such "
                                     "partitions at their latest offset.")
        return resolved


def _names(tps: set[TopicPartitionKey]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in sorted(tps)) or "none"


def offset_ranges(starts: dict[TopicPartitionKey, int], ends: dict[TopicPartitionKey, int],
                  settings: ReadSettings, min_partitions: int | None) -> list[OffsetRange]:
    """The non-empty ranges [start, end) per partition, split to give at least `min_partitions` tasks."""
    ranges = [OffsetRange(topic, partition, starts[(topic, partition)], end, settings)
              for (topic, partition), end in sorted(ends.items())
              if (topic, partition) in starts and end > starts[(topic, partition)]]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    split: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size / total * min_partitions)))
        step = math.ceil(r.size / parts)
        for start in range(r.from_offset, r.until_offset, step):
            split.append(OffsetRange(r.topic, r.partition, start, min(start + step, r.until_offset), settings))
    return split


class OffsetRangeGroup(InputPartition):
    """Several offset ranges read one after the other by one task (`maxPartitions`)."""

    def __init__(self, ranges: list[OffsetRange]) -> None:
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = ranges


def packed(ranges: list[OffsetRange], max_partitions: int | None) -> list[OffsetRange] | list[OffsetRangeGroup]:
    """`ranges` as they are, or packed by size into `max_partitions` groups when there are more:
    each range, largest first, joins the group with the fewest offsets so far."""
    if not max_partitions or len(ranges) <= max_partitions:
        return ranges
    groups: list[list[OffsetRange]] = [[] for _ in range(max_partitions)]
    sizes = [0] * max_partitions
    for offset_range in sorted(ranges, key=lambda r: r.size, reverse=True):
        smallest = sizes.index(min(sizes))
        groups[smallest].append(offset_range)
        sizes[smallest] += offset_range.size
    return [OffsetRangeGroup(group) for group in groups]


def read_range(offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of one range as Arrow record batches, read from the gateway page by page, the next
    page requested (on a thread of its own) while Spark takes the batches of the current one; the first
    page is at most FIRST_PAGE_BYTES, so that Spark has rows to take sooner."""
    settings = offset_range.settings
    topic, partition, until = offset_range.topic, offset_range.partition, offset_range.until_offset
    path = f"/v3/clusters/{settings.cluster_id}/topics/{quote(topic, safe='')}/partitions/{partition}/records"
    with (GatewayClient(settings.gateway, settings.timeout_s, cluster_id=settings.cluster_id,
                        authorization=settings.authorization) as client,
          ThreadPoolExecutor(max_workers=1, thread_name_prefix="odradek-range") as requests):
        def page(offset: int, max_bytes: int = settings.max_bytes_per_request) -> Future:
            return requests.submit(client.request, "GET", path, headers={"Accept": ARROW_STREAM}, params={
                "offset": offset, "end_offset": until, "max_bytes": max_bytes,
                "isolation_level": settings.isolation_level})

        position = offset_range.from_offset
        pending = page(position, min(FIRST_PAGE_BYTES, settings.max_bytes_per_request)) if position < until else None
        while pending is not None:
            response = pending.result()
            earliest = int(response.headers[EARLIEST_HEADER])
            next_offset = int(response.headers[NEXT_OFFSET_HEADER])
            pending = page(next_offset) if position < next_offset < until else None
            if position < earliest:
                report_data_loss(settings.fail_on_data_loss,
                                 f"Offsets {position} to {min(earliest, until)} of "
                                 f"{topic}-{partition} are gone: the partition now starts at {earliest}.")
            for batch in pa.ipc.open_stream(response.content):
                if batch.num_rows:
                    yield batch if settings.include_headers else batch.drop_columns(["headers"])
            if next_offset <= position:
                report_data_loss(settings.fail_on_data_loss,
                                 f"Offsets {position} to {until} of {topic}-{partition} "
                                 f"cannot be read: the partition ends before them now.")
                return
            position = next_offset
