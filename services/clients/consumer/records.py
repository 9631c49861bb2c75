"""What `Consumer.poll()` returns: `ConsumerRecord` (one record, a tuple with named fields) and
`ConsumerRecords` (the records of one poll, grouped by partition), plus `TimestampType`,
`OffsetAndTimestamp` (an answer of `offsets_for_times`), `OffsetAndMetadata` (an offset a group
commits or has committed) and `RecordBlock`, the column-wise form in which the decoder hands
over the records of one batch.

A `ConsumerRecord` is a tuple subclass. Decoded records stay in their `RecordBlock` columns (one
list per field that varies, a range for consecutive offsets) until the application iterates;
each ConsumerRecord is then made with one `tuple.__new__` over C-level iterators, so decoding
allocates little more than the key and value bytes, and a record the application drops at once
is never seen by the garbage collector. `timestamp_type` is a `TimestampType` value held as a
plain int; `leader_epoch` is the partition leader epoch of the record's batch (None when the
batch carries none); the serialized sizes are those of the key and value bytes (-1 for null),
before any deserializer.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, KeysView, Mapping, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from services.common.topic_partition import TopicPartition

Header = tuple[str, "bytes | None"]


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[Header, ...]
    leader_epoch: int | None
    serialized_key_size: int
    serialized_value_size: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


make_record = functools.partial(tuple.__new__, ConsumerRecord)


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to read, free-form metadata, and the
    leader epoch of the last record consumed (None when unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class OffsetAndTimestamp(NamedTuple):
    """The first offset whose timestamp is at or after the one asked for, with that timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


def _sizes(items: Sequence[Any]) -> list[int]:
    return [-1 if item is None else len(item) for item in items]


class RecordBlock:
    """Records of one batch (or a slice of them), column by column.

    `offsets` is a range when the offsets are consecutive; `keys` None means every key is null,
    `headers` None that no record has headers; `key_sizes` / `value_sizes` None mean the sizes
    are the lengths of the keys / values, none of which is null.
    """

    __slots__ = ("topic", "partition", "timestamp_type", "leader_epoch", "offsets", "timestamps", "keys", "values",
                 "headers", "key_sizes", "value_sizes")

    def __init__(self, topic: str, partition: int, timestamp_type: int, leader_epoch: int | None,
                 offsets: Sequence[int], timestamps: Sequence[int], keys: Sequence[Any] | None,
                 values: Sequence[Any], headers: Sequence[tuple] | None = None,
                 key_sizes: Sequence[int] | None = None, value_sizes: Sequence[int] | None = None):
        self.topic = topic
        self.partition = partition
        self.timestamp_type = timestamp_type
        self.leader_epoch = leader_epoch
        self.offsets = offsets
        self.timestamps = timestamps
        self.keys = keys
        self.values = values
        self.headers = headers
        self.key_sizes = key_sizes
        self.value_sizes = value_sizes

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        count = len(self.values)
        keys = self.keys
        if self.key_sizes is not None:
            key_sizes: Iterable[int] = self.key_sizes
        else:
            key_sizes = repeat(-1) if keys is None else map(len, keys)
        return map(make_record, zip(
            repeat(self.topic, count), repeat(self.partition), self.offsets, self.timestamps,
            repeat(self.timestamp_type), repeat(None) if keys is None else keys, self.values,
            repeat(()) if self.headers is None else self.headers, repeat(self.leader_epoch), key_sizes,
            map(len, self.values) if self.value_sizes is None else self.value_sizes))

    def __getitem__(self, index: slice) -> RecordBlock:
        """A slice of the block (only slices are supported)."""
        def cut(column):
            return None if column is None else column[index]

        return RecordBlock(self.topic, self.partition, self.timestamp_type, self.leader_epoch, self.offsets[index],
                           self.timestamps[index], cut(self.keys), self.values[index], cut(self.headers),
                           cut(self.key_sizes), cut(self.value_sizes))

    def with_sizes(self) -> RecordBlock:
        """The same block with its serialized sizes held as lists (before keys or values change)."""
        key_sizes = self.key_sizes
        if key_sizes is None:
            key_sizes = [-1] * len(self.values) if self.keys is None else _sizes(self.keys)
        value_sizes = _sizes(self.values) if self.value_sizes is None else self.value_sizes
        return RecordBlock(self.topic, self.partition, self.timestamp_type, self.leader_epoch, self.offsets,
                           self.timestamps, self.keys, self.values, self.headers, key_sizes, value_sizes)

    def deserialize(self, key_deserializer: Callable[[bytes], Any] | None,
                    value_deserializer: Callable[[bytes], Any] | None) -> tuple[RecordBlock, int | None,
                                                                                 Exception | None]:
        """(the block with keys and values deserialized, the index of the record a deserializer
        failed on or None, that error). After a failure the block ends before the failing record."""
        block = self.with_sizes()
        keys = block.keys if key_deserializer is not None else None
        values = block.values if value_deserializer is not None else None
        new_keys: list[Any] = []
        new_values: list[Any] = []
        failed_at, error = None, None
        for index in range(len(block)):
            try:
                if keys is not None:
                    key = keys[index]
                    new_keys.append(None if key is None else key_deserializer(key))
                if values is not None:
                    value = values[index]
                    new_values.append(None if value is None else value_deserializer(value))
            except Exception as exc:
                failed_at, error = index, exc
                break
        end = len(block) if failed_at is None else failed_at
        result = block[:end]
        if keys is not None:
            result.keys = new_keys[:end]
        if values is not None:
            result.values = new_values[:end]
        return result, failed_at, error


class ConsumerRecords:
    """The records one poll returned, partition by partition, each partition's in offset order.

    A sequence of records, as the Java client's ConsumerRecords: iterating yields every record
    (one partition after another), `len()` and `count()` are the number of records, `records(tp)`
    the records of a partition or a topic, `partitions()` the partitions that have records.

    Also a mapping by partition, as kafka-python's `poll()` dict: `records[tp]` (a list of the
    partition's records; KeyError for a partition without any), `tp in records`, `get(tp)`,
    `keys()` (the partitions), `values()` and `items()` (lists of records by partition), and
    `dict(records)` is kafka-python's dict. A partition is a TopicPartition or a (topic,
    partition) pair. Unlike a dict's, iteration and `len()` stay the Java client's, over records:
    `for tp in records.keys()` walks partitions, `len(records.keys())` counts them. `record in
    records` asks whether a ConsumerRecord is among the records.

    Built from sized iterables of records per partition (RecordBlocks, or lists of ConsumerRecord).
    """

    __slots__ = ("_parts", "_count")

    def __init__(self, parts_by_partition: Mapping[TopicPartition, list[Any]] | None = None):
        self._parts: dict[TopicPartition, list[Any]] = dict(parts_by_partition or {})
        self._count = sum(len(part) for parts in self._parts.values() for part in parts)

    @classmethod
    def from_records(cls, records: Mapping[TopicPartition, list[ConsumerRecord]]) -> ConsumerRecords:
        return cls({tp: [list(part)] for tp, part in records.items()})

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return itertools.chain.from_iterable(itertools.chain.from_iterable(self._parts.values()))

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def count(self) -> int:
        return self._count

    def is_empty(self) -> bool:
        return self._count == 0

    def partitions(self) -> set[TopicPartition]:
        return set(self._parts)

    def records(self, tp: TopicPartition | str) -> list[ConsumerRecord]:
        """The records of one partition (a topic name gives the records of all its partitions)."""
        if isinstance(tp, str):
            parts = [part for key, parts in self._parts.items() if key.topic == tp for part in parts]
        else:
            parts = self._parts.get(tp, [])
        return list(itertools.chain.from_iterable(parts))

    def __getitem__(self, tp: TopicPartition) -> list[ConsumerRecord]:
        if tp not in self._parts:
            raise KeyError(tp)
        return self.records(tp)

    def get(self, tp: TopicPartition, default: Any = None) -> list[ConsumerRecord] | Any:
        return self.records(tp) if tp in self._parts else default

    def __contains__(self, item: object) -> bool:
        if isinstance(item, ConsumerRecord):
            return any(item == record for record in self)
        try:
            return item in self._parts
        except TypeError:  # unhashable: not a partition
            return False

    def keys(self) -> KeysView[TopicPartition]:
        return self._parts.keys()

    def values(self) -> list[list[ConsumerRecord]]:
        return [self.records(tp) for tp in self._parts]

    def items(self) -> list[tuple[TopicPartition, list[ConsumerRecord]]]:
        return [(tp, self.records(tp)) for tp in self._parts]

    def __repr__(self) -> str:
        return f"ConsumerRecords({self._count} records from {len(self._parts)} partitions)"


EMPTY_RECORDS = ConsumerRecords()
