"""`spark.readStream.format("odradek")`: micro-batches of offset ranges, as Spark's Kafka source.

Offsets are Spark's Kafka source JSON, `{"topic": {"partition": offset}}` (what the checkpoint
holds, so a restarted query resumes where its last committed batch ended). Each `latestOffset`
asks the gateway for the subscription's partitions and latest offsets: partitions that appeared
since the last batch are read from their beginning (data loss if that is no longer offset 0),
partitions that disappeared or went backwards are data loss. `maxOffsetsPerTrigger` becomes the
default read limit (`ReadMaxRows`), spread over the partitions by how far behind each is, as Spark
does; `Trigger.AvailableNow` reads up to the offsets latest when the query started.
`minOffsetsPerTrigger` holds a trigger back (its latest offset is its start: no batch) while fewer
new offsets are there and `maxTriggerDelay` has not passed since the last batch (`delays_batch`,
Spark's rule; the first trigger is never held). On pyspark
versions without the admission-control API (`latestOffset()` without arguments) the reader keeps
the start itself.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from services.clients.spark.options import ReadOptions
from services.clients.spark.planning import (
    OffsetRange,
    Planner,
    TopicPartitionKey,
    offset_ranges,
    read_range,
    report_data_loss,
)

try:  # pyspark >= 4.2: read limits and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - pyspark 4.1
    ReadLimit = ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

Offsets = dict[TopicPartitionKey, int]


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    encoded: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        encoded.setdefault(topic, {})[str(partition)] = offset
    return encoded


def from_json(encoded: dict) -> Offsets:
    return {(topic, int(partition)): int(offset)
            for topic, partitions in encoded.items() for partition, offset in partitions.items()}


def rate_limited(start: Offsets, latest: Offsets, max_offsets: int) -> Offsets:
    """Ends that read at most about `max_offsets` records, each partition's share by its lag."""
    lags = {tp: latest[tp] - start.get(tp, 0) for tp in latest}
    total = sum(lag for lag in lags.values() if lag > 0)
    if total <= max_offsets:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        begin = start.get(tp, 0)
        if lags[tp] <= 0:
            ends[tp] = end
            continue
        share = max_offsets * lags[tp] / total
        ends[tp] = min(end, begin + (math.ceil(share) if share < 1 else math.floor(share)))
    return ends


def delays_batch(available: int, min_offsets: int, max_delay_ms: int, last_trigger_ms: float | None,
                 now_ms: float) -> bool:
    """Whether a trigger with `available` new offsets runs no batch under `minOffsetsPerTrigger`:
    fewer than `min_offsets` and less than `max_delay_ms` since the last batch ran."""
    if last_trigger_ms is None or now_ms - last_trigger_ms >= max_delay_ms:
        return False
    return available < min_offsets


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = ReadOptions.parse(options, streaming=True)
        self.schema = schema
        self._planner: Planner | None = None
        self._latest: Offsets | None = None
        self._target: Offsets | None = None
        self._last_end: Offsets | None = None
        self._last_trigger_ms: float | None = None

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.options)
        return self._planner

    def initialOffset(self) -> dict:
        offsets = self.planner.partition_offsets()
        starts = self.planner.resolve(self.options.starting, offsets, "startingOffsets")
        self._last_end = starts
        return to_json(starts)

    def getDefaultReadLimit(self) -> object:
        if ReadMaxRows is not None and self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest_offsets()

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def _latest_offsets(self) -> Offsets:
        offsets = self.planner.partition_offsets()
        self._latest = {tp: partition_offsets.latest for tp, partition_offsets in offsets.items()}
        return dict(self._latest)

    def latestOffset(self, start: dict | None = None, limit: object = None) -> dict:
        begin = from_json(start) if start is not None else dict(self._last_end or {})
        latest = self._latest_offsets()
        if self._target is not None:  # AvailableNow: nothing past what was there when the query started
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items() if tp in self._target}
        for tp in begin:
            if tp not in latest and self._target is None:
                report_data_loss(self.options.fail_on_data_loss,
                                 f"Partition {tp[0]}-{tp[1]} is gone (its topic was deleted?).")
        for tp, end in latest.items():
            if tp not in begin:
                continue
            if end < begin[tp]:
                report_data_loss(self.options.fail_on_data_loss,
                                 f"Partition {tp[0]}-{tp[1]}'s latest offset went back from {begin[tp]} to {end}.")
        max_offsets = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_offsets = limit.max_rows
        elif limit is None and start is None:
            max_offsets = self.options.max_offsets_per_trigger
        min_offsets = self.options.min_offsets_per_trigger
        if min_offsets and self._target is None:
            now_ms = time.monotonic() * 1000
            available = sum(max(0, end - begin.get(tp, 0)) for tp, end in latest.items())
            if delays_batch(available, min_offsets, self.options.max_trigger_delay_ms, self._last_trigger_ms, now_ms):
                self._last_end = dict(begin)
                return to_json(begin)
            self._last_trigger_ms = now_ms
        ends = rate_limited(begin, latest, max_offsets) if max_offsets else latest
        if self._target is not None:  # partitions the target does not list keep their offsets
            for tp, offset in begin.items():
                ends.setdefault(tp, offset)
        self._last_end = ends
        return to_json(ends)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, ends = from_json(start), from_json(end)
        starts = {}
        for tp, until in ends.items():
            if tp in begin:
                starts[tp] = begin[tp]
            else:  # a partition new since the last batch: from its beginning, as Spark's Kafka source
                starts[tp] = 0
            if until < starts[tp]:
                starts[tp] = until
        return offset_ranges(starts, ends, self.planner.settings, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):  # with no range planned, Spark still reads one empty partition
            yield from read_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint holds the offsets, and nothing is held for them."""

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
