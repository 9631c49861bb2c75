"""Turns one fetched RecordBatch v2 into a `RecordBlock`, the consumer's column-wise records.

The records are read, and their framing checked, by the one record reader
(`services.common.records.reader.read_batch`); a malformed batch raises CorruptRecordError
there before any of its records is handed out. This module only adds what the consumer shows
beside them: topic, partition, timestamp type, leader epoch and the serialized sizes.
"""

from __future__ import annotations

from services.clients.consumer.records import RecordBlock
from services.common.records.batch import LOG_APPEND_TIME, BatchHeader
from services.common.records.reader import read_batch


def decode_batch(buf: bytes, pos: int, header: BatchHeader, topic: str, partition: int) -> RecordBlock:
    """The records of the (already validated) batch at `pos` of `buf`, in offset order."""
    offsets, timestamps, keys, values, headers = read_batch(buf, pos, header)
    base_offset = header.base_offset
    count = len(values)
    key_sizes = None
    if keys is not None and None in keys:
        key_sizes = [-1 if key is None else len(key) for key in keys]
    value_sizes = [-1 if value is None else len(value) for value in values] if None in values else None
    epoch = header.partition_leader_epoch
    return RecordBlock(topic, partition, int(header.timestamp_type == LOG_APPEND_TIME), epoch if epoch >= 0 else None,
                       range(base_offset, base_offset + count) if offsets is None else offsets,
                       timestamps, keys, values, headers, key_sizes, value_sizes)
