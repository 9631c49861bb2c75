"""`spark.read.format("odradek")`: one task per offset range, or per group of ranges when there are
more ranges than `maxPartitions` or than Spark's default parallelism (`ReadOptions.task_limit`);
planned on the driver from the starting and ending options (Spark's Kafka source semantics) and
read as Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from services.clients.spark.options import ReadOptions
from services.clients.spark.planning import (
    OffsetRange,
    OffsetRangeGroup,
    Planner,
    offset_ranges,
    packed,
    read_range,
    report_data_loss,
)


class OdradekBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType, default_parallelism: int | None = None) -> None:
        self.options = ReadOptions.parse(options, streaming=False)
        self.schema = schema
        self.default_parallelism = default_parallelism

    def partitions(self) -> Sequence[InputPartition]:
        planner = Planner(self.options)
        try:
            offsets = planner.partition_offsets()
            starts = planner.resolve(self.options.starting, offsets, "startingOffsets")
            ends = planner.resolve(self.options.ending, offsets, "endingOffsets")
            for tp, start in starts.items():
                if start < offsets[tp].earliest:
                    report_data_loss(self.options.fail_on_data_loss,
                                     f"startingOffsets {start} of {tp[0]}-{tp[1]} is before the partition's "
                                     f"earliest offset {offsets[tp].earliest}.")
                if ends[tp] < start:
                    raise ValueError(f"The ending offset {ends[tp]} of {tp[0]}-{tp[1]} is before its starting "
                                     f"offset {start}.")
            ranges = offset_ranges(starts, ends, planner.settings, self.options.min_partitions)
            return packed(ranges, self.options.task_limit(self.default_parallelism))
        finally:
            planner.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, OffsetRange):  # with no range planned, Spark still reads one empty partition
            yield from read_range(partition)
        elif isinstance(partition, OffsetRangeGroup):
            for offset_range in partition.ranges:
                yield from read_range(offset_range)
