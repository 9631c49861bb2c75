"""A producer's entry in a partition's producer state (`ProducerStateEntry`, with the metadata of its
last data batches, `BatchMetadata`) and the snapshot file that stores those entries.

Snapshot file `<20-digit offset>.snapshot` in the partition directory: the state of every producer
after all batches below that offset. Kafka's ProducerSnapshot version 1, big-endian:

    offset  size  field
    0       2     version                   int16, 1
    2       4     crc                       uint32, CRC-32C of bytes 6..end of file
    6       4     entry count               int32 (>= 0)
    10      46*n  entries, each 46 bytes:
      +0    8       producer_id             int64
      +8    2       epoch                   int16
      +10   4       last_sequence           int32, -1 when the producer has no data batch
      +14   8       last_offset             int64, -1 when the producer has no data batch
      +22   4       offset_delta            int32, last_offset - first offset of that batch
      +26   8       timestamp               int64, max timestamp of that batch
      +34   4       coordinator_epoch       int32, -1 when no marker was seen
      +38   8       current_txn_first_offset int64, -1 when no transaction is open

A producer with several cached batches has one entry per batch, oldest first; the fields other
than last_sequence, last_offset, offset_delta and timestamp repeat, and the last entry's timestamp
is the producer's last timestamp. A reader keeping only the last entry per producer id, as Kafka's
does, gets Kafka's state; this one gets all 5 batches back. A file with another version, a wrong
length or a CRC mismatch is corrupt: it is deleted and ignored.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import NamedTuple

from crc32c import crc32c

from services.broker.log.errors import CorruptSnapshotError
from services.broker.log.files import PRODUCER_SNAPSHOT_FILE_SUFFIX, offset_from_file_name
from services.common.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE
from services.common.shared_types import NO_OFFSET, NO_TIMESTAMP

NUM_BATCHES_TO_RETAIN = 5
NO_COORDINATOR_EPOCH = -1
MAX_SEQUENCE = 0x7FFFFFFF
SNAPSHOT_VERSION = 1
SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
CRC_START = 6


class BatchMetadata(NamedTuple):
    """One appended data batch of a producer."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return (self.last_seq - self.offset_delta) & MAX_SEQUENCE

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """What the log knows of one producer id."""

    __slots__ = ("producer_id", "producer_epoch", "batches", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, batches=(),
                 coordinator_epoch: int = NO_COORDINATOR_EPOCH, last_timestamp: int = NO_TIMESTAMP,
                 current_txn_first_offset: int | None = None) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(batches, NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_batch(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this sequence range."""
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def as_tuple(self) -> tuple:
        return (self.producer_epoch, tuple(self.batches), self.coordinator_epoch, self.last_timestamp,
                self.current_txn_first_offset)

    def __repr__(self) -> str:
        return f"ProducerStateEntry({self.producer_id}, {self.as_tuple()})"


def list_snapshot_files(log_dir: str) -> dict[int, str]:
    suffix = PRODUCER_SNAPSHOT_FILE_SUFFIX
    return {offset_from_file_name(name): os.path.join(log_dir, name) for name in os.listdir(log_dir)
            if name.endswith(suffix) and len(name) == 20 + len(suffix) and name[:20].isdigit()}


def encode_snapshot(entries) -> bytes:
    """The snapshot file bytes for these producers (see the module doc)."""
    body = []
    pack = SNAPSHOT_ENTRY.pack
    for entry in entries:
        txn = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        head = (entry.producer_id, entry.producer_epoch)
        tail = (entry.coordinator_epoch, txn)
        batches = entry.batches
        if not batches:
            body.append(pack(*head, NO_SEQUENCE, NO_OFFSET, 0, entry.last_timestamp, *tail))
            continue
        last = len(batches) - 1
        for i, batch in enumerate(batches):
            timestamp = entry.last_timestamp if i == last else batch.timestamp
            body.append(pack(*head, batch.last_seq, batch.last_offset, batch.offset_delta, timestamp, *tail))
    data = bytearray(SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, 0, len(body)))
    data += b"".join(body)
    struct.pack_into(">I", data, 2, crc32c(memoryview(data)[CRC_START:]))
    return bytes(data)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """The producers of a snapshot file's bytes; raises CorruptSnapshotError."""
    if len(data) < SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc, count = SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if count < 0 or len(data) != SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"{len(data)} bytes do not hold {count} snapshot entries")
    computed = crc32c(memoryview(data)[CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"snapshot CRC {crc:#010x} does not match the computed {computed:#010x}")
    entries: dict[int, ProducerStateEntry] = {}
    for fields in SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[SNAPSHOT_HEADER.size:]):
        producer_id, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn = fields
        entry = entries.get(producer_id)
        if entry is None or entry.producer_epoch != epoch:
            entry = entries[producer_id] = ProducerStateEntry(producer_id, epoch)
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, timestamp))
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        entry.current_txn_first_offset = txn if txn >= 0 else None
    return list(entries.values())


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        return decode_snapshot(f.read())
