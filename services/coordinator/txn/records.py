"""The records of `__transaction_state`, byte for byte as Kafka 2.8's TransactionLog writes them,
plus one value version of Odradek's own.

All integers are big-endian; a STRING is an int16 length and that many UTF-8 bytes; an ARRAY is
an int32 element count and the elements. The key is the transactional id; a null value is a
tombstone (the transactional id expired and was removed).

    key    version int16 = 0, transactional_id STRING
    value  version int16 = 0,
           producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
           state int8 (TransactionState below),
           partitions ARRAY of (topic STRING, partition_ids ARRAY of int32),
           last_update_timestamp_ms int64, start_timestamp_ms int64 (-1 = none)
    value  version int16 = 1: version 0's fields, then bumped_from_epoch int16

Version 1 is written only for the PrepareAbort of an EndTxn that bumped the producer epoch and the
CompleteAbort after it: `bumped_from_epoch` is the epoch the abort ended (the previous one), so
that a retry of that EndTxn at the old epoch is still recognised after the log is replayed. Every
other value is version 0 (`bumped_from_epoch` -1).

States: Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit 4, CompleteAbort 5,
Dead 6, PrepareEpochFence 7 (the last two are never written). Partitions are written sorted, by
topic then partition. The log's fence records (key version 3, see `offsets_log`) are not
transaction records and are never handed to this codec.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from services.common.records.batch import NO_PRODUCER_EPOCH
from services.common.topic_partition import TopicPartition

KEY_VERSION = 0
VALUE_VERSION = 0
BUMPED_VALUE_VERSION = 1
NO_TIMESTAMP = -1

_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, state
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_TIMES = struct.Struct(">qq")


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """Kafka's name of the state ("PrepareCommit"), as ListTransactions shows it."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_display_name(cls, name: str) -> TransactionState | None:
        return next((state for state in cls if state.display_name == name), None)


class TxnRecordFormatError(ValueError):
    """A `__transaction_state` key or value this codec cannot decode."""


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """One transaction's state as the log holds it."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int = NO_TIMESTAMP
    bumped_from_epoch: int = NO_PRODUCER_EPOCH  # the epoch an EndTxn abort with bump ended


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    return _INT16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(value: TxnLogValue) -> bytes:
    bumped = value.bumped_from_epoch != NO_PRODUCER_EPOCH
    version = BUMPED_VALUE_VERSION if bumped else VALUE_VERSION
    parts = [_HEAD.pack(version, value.producer_id, value.producer_epoch, value.timeout_ms,
                        int(value.state))]
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(value.partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts.append(_INT32.pack(len(by_topic)))
    for topic, partitions in by_topic.items():
        parts.append(_string(topic))
        parts.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    parts.append(_TIMES.pack(value.last_update_timestamp_ms, value.start_timestamp_ms))
    if bumped:
        parts.append(_INT16.pack(value.bumped_from_epoch))
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = bytes(data), 0, what

    def take(self, fmt: struct.Struct) -> tuple:
        if self.pos + fmt.size > len(self.data):
            raise TxnRecordFormatError(f"{self.what}: truncated at byte {self.pos}")
        values = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return values

    def count(self) -> int:
        (count,) = self.take(_INT32)
        if count < 0 or count > len(self.data):
            raise TxnRecordFormatError(f"{self.what}: bad array length {count}")
        return count

    def string(self) -> str:
        (length,) = self.take(_INT16)
        if length < 0 or self.pos + length > len(self.data):
            raise TxnRecordFormatError(f"{self.what}: bad string length {length} at byte {self.pos}")
        raw, self.pos = self.data[self.pos:self.pos + length], self.pos + length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TxnRecordFormatError(f"{self.what}: string is not UTF-8: {e}") from None


def decode_key(data: bytes | None) -> str:
    """The transactional id of a key; TxnRecordFormatError for another version or a bad key."""
    if data is None:
        raise TxnRecordFormatError("__transaction_state record without a key")
    reader = _Reader(data, "__transaction_state key")
    (version,) = reader.take(_INT16)
    if version != KEY_VERSION:
        raise TxnRecordFormatError(f"unknown __transaction_state key version {version}")
    return reader.string()


def decode_value(data: bytes | None) -> TxnLogValue | None:
    """The transaction of a value; None for a tombstone."""
    if data is None:
        return None
    reader = _Reader(data, "__transaction_state value")
    version, producer_id, epoch, timeout_ms, state = reader.take(_HEAD)
    if version not in (VALUE_VERSION, BUMPED_VALUE_VERSION):
        raise TxnRecordFormatError(f"unknown __transaction_state value version {version}")
    try:
        state = TransactionState(state)
    except ValueError:
        raise TxnRecordFormatError(f"unknown transaction state {state}") from None
    partitions = set()
    for _ in range(reader.count()):
        topic = reader.string()
        for _ in range(reader.count()):
            partitions.add(TopicPartition(topic, reader.take(_INT32)[0]))
    last_update_ms, start_ms = reader.take(_TIMES)
    bumped_from = reader.take(_INT16)[0] if version == BUMPED_VALUE_VERSION else NO_PRODUCER_EPOCH
    return TxnLogValue(producer_id, epoch, timeout_ms, state, frozenset(partitions), last_update_ms, start_ms,
                       bumped_from)
